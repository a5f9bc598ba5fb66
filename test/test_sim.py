"""The robosuite bridge's world readout agrees with robosuite's own
observations; physics rollouts become bags with ground truth that the
shipped configuration audits faithfully."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from conftest import REPO
from ros_helpers import ros_node
from rosbags.rosbag2 import Reader
from test_bag_layouts import raw_bag_samples_equal_rosbags

from safemanip_ros.bag.typestore import typestore
from safemanip_ros.grounding.config import load_robot_config
from safemanip_ros.grounding.messages import GroundingSet
from safemanip_ros.sim.faithfulness import format_table, score
from safemanip_ros.sim.policies import EEF_BODY, LiftPolicy
from safemanip_ros.sim.recording import RolloutSpec, read_truth, run_rollout
from safemanip_ros.sim.ros_messages import TOPICS
from safemanip_ros.sim.world import SimWorld

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


def test_rollout_bag_and_truth(world, tmp_path):
    truth = run_rollout(world, RolloutSpec('Lift', 'midair_drop', 5), tmp_path)
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
        # The policy's phases as skill events: each entered (START) and left (END) in turn.
        conn = next(c for c in reader.connections if c.topic == '/skill_events')
        events = [ts.deserialize_cdr(raw, conn.msgtype) for _, _, raw in reader.messages(connections=[conn])]
        assert (events[0].skill, events[0].target, events[0].phase) == ('approach', 'cube', 0)
        assert [e.phase for e in events] == [0, 1] * (len(events) // 2) and len(events) >= 6
    # The audit's column-wise decoding of the raw inputs equals rosbags' on physics output.
    assert raw_bag_samples_equal_rosbags(bag) == sum(n for t, n in counts.items()
                                                     if t not in ('/clock', '/skill_events'))


def _three_rollouts_scored(world, tmp_path, perception_level: str) -> tuple[dict, str, list]:
    """A clean Lift rollout, a mid-air drop and a drag recorded at a
    perception level, audited with the shipped configuration and scored."""
    from safemanip_ros.audit.engine import AuditConfig, run_audit
    from safemanip_ros.audit.report import build_report
    from safemanip_ros.resources import default_suites
    from safemanip_ros.sim.perception import LEVELS
    bags = []
    for fault, seed in (('none', 11), ('midair_drop', 12), ('drag', 13)):
        spec = RolloutSpec('Lift', fault, seed)
        run_rollout(world, spec, tmp_path, perception=LEVELS[perception_level])
        bags.append(tmp_path / spec.name)
    cfg = AuditConfig(tuple(str(p) for p in default_suites()), robot_config=str(ROBOT))
    results, skipped = run_audit([str(b) for b in bags], cfg, tmp_path / 'audit', 1)
    assert not skipped
    result = score(build_report(results, skipped, {'reduction': 'any'}), bags)
    return result, format_table(result), bags


def test_faithfulness_on_a_few_rollouts(world, tmp_path):
    """A clean rollout, a drop and a drag: the shipped configuration flags
    exactly the faulty ones, with the property meant for each."""
    result, table, _ = _three_rollouts_scored(world, tmp_path, 'truth')
    assert result['specificity'] == 1.0 and result['sensitivity'] == 1.0, table
    props = result['properties']
    assert props['release_only_over_support']['detected'] == 1, table
    assert props['no_dragging_on_support']['detected'] == 1, table
    assert props['no_dragging_on_support']['median_latency_frames'] <= 8 + 3, table


def test_faithfulness_under_realistic_perception(world, tmp_path):
    """The same three rollouts with the cube's pose from a simulated camera
    tracker (5 mm / 2 deg noise, 10 Hz, 10 % missed, 100 ms late, half lost
    between the fingers) on /tf beside the exact robot links: still no false
    alarm, both faults caught by the property meant for each."""
    result, table, bags = _three_rollouts_scored(world, tmp_path, 'realistic')
    ts = typestore()
    with Reader(bags[0]) as reader:
        conns = [c for c in reader.connections if c.topic == '/tf']
        messages = [(t, ts.deserialize_cdr(raw, c.msgtype)) for c, t, raw in reader.messages(connections=conns)]
    detections = [(t, m) for t, m in messages if [tr.child_frame_id for tr in m.transforms] == ['cube_main']]
    robot = [m for _, m in messages if 'cube_main' not in [tr.child_frame_id for tr in m.transforms]]
    assert 0 < len(detections) < len(robot) / 2          # its own messages, at most 10 Hz
    late_ns = [t - (m.transforms[0].header.stamp.sec * 10**9 + m.transforms[0].header.stamp.nanosec)
               for t, m in detections]
    assert min(late_ns) >= 99_000_000                    # stamped at capture, published 100 ms later
    assert result['specificity'] == 1.0 and result['sensitivity'] == 1.0, table
    props = result['properties']
    assert props['release_only_over_support']['detected'] == 1, table
    assert props['no_dragging_on_support']['detected'] == 1, table
    assert props['no_dragging_on_support']['median_latency_frames'] <= 8 + 3, table


def test_doctor_checks_names_against_a_bag(world, tmp_path):
    from conftest import run_cli
    run_rollout(world, RolloutSpec('Lift', 'none', 21), tmp_path)
    bag = str(tmp_path / 'lift_none_021')
    ok = run_cli('doctor', '--config', str(ROBOT), bag)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert 'every configured name matches' in ok.stdout
    assert 'press_preconditions_safe: needs preconditions_satisfied_press, press_approach' in ok.stdout
    # A configuration written for other names: every mismatch is named, exit 1.
    other = run_cli('doctor', '--config', str(REPO / 'config' / 'robots' / 'panda_demo.yaml'), bag)
    assert other.returncode == 1, other.stdout + other.stderr
    assert "MISMATCH joint 'gripper0_finger_joint1' (joints.gripper): matches nothing" in other.stdout
    assert "MISMATCH frame 'mug_main' (" in other.stdout
    assert "MISMATCH contact body 'cube_main' (contacts / entities): not mapped by the configuration" in other.stdout
    # ... and the audit with that configuration says so instead of reporting a clean run in silence.
    audit = run_cli('audit', bag, '--config', str(REPO / 'config' / 'robots' / 'panda_demo.yaml'),
                    '--out', str(tmp_path / 'out'), '--quiet')
    assert audit.returncode == 0, audit.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    warnings = report['episodes'][0]['warnings']
    assert any('contact bodies are not in' in w and 'cube_main' in w for w in warnings), warnings
    assert any('none of the' in w and 'safemanip doctor' in w for w in warnings), warnings
    bad = run_cli('doctor', '--config', str(ROBOT))
    assert bad.returncode == 2 and 'give a BAG or --live' in bad.stderr


def test_doctor_live_graph(world):
    """``--live``: names come from what arrives on the graph (a bridge-like publisher here)."""
    import subprocess
    import sys
    import threading

    from geometry_msgs.msg import Point, Quaternion, Transform, TransformStamped, Vector3
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Header
    from tf2_msgs.msg import TFMessage

    from safemanip_ros.msg import Contact, ContactArray
    from safemanip_ros.sim import ros_messages as messages

    class _Time:
        def __new__(cls, sec, nanosec):
            from builtin_interfaces.msg import Time
            return Time(sec=sec, nanosec=nanosec)

    types = messages.MessageTypes(_Time, Header, JointState, TFMessage, TransformStamped, Transform, Vector3,
                                  Quaternion, Contact, ContactArray, Point, Clock)
    sample = world.reset()
    with ros_node('fake_robot') as (node, _):
        pubs = {t: node.create_publisher(k, t, 10) for t, k in (('/joint_states', JointState), ('/tf', TFMessage),
                                                                ('/contacts', ContactArray))}
        stop = threading.Event()

        def publish():
            while not stop.is_set():
                pubs['/joint_states'].publish(messages.joint_state(types, sample))
                pubs['/tf'].publish(messages.transforms(types, sample, list(sample.poses)))
                pubs['/contacts'].publish(messages.contacts(types, sample))
                stop.wait(0.05)

        thread = threading.Thread(target=publish, daemon=True)
        thread.start()
        try:
            exe = [sys.executable, '-m', 'safemanip_ros.cli.main']
            proc = subprocess.run(exe + ['doctor', '--config', str(ROBOT), '--live', '--listen-s', '4'],
                                  capture_output=True, text=True, timeout=120)
        finally:
            stop.set()
            thread.join()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'every configured name matches' in proc.stdout
    assert '9 joints' in proc.stdout and '/contacts' in proc.stdout


def test_config_init_draft_passes_doctor_once_choices_are_made(world, tmp_path):
    from conftest import run_cli
    run_rollout(world, RolloutSpec('Lift', 'none', 31), tmp_path)
    bag = str(tmp_path / 'lift_none_031')
    draft = tmp_path / 'robot.yaml'
    proc = run_cli('config', 'init', '--from-bag', bag, '--out', str(draft))
    assert proc.returncode == 0, proc.stderr
    text = draft.read_text()
    assert 'gripper0_right_finger_joint2: {sign: -1}' in text and 'gripper_frame: gripper0_right_eef' in text
    choices = sum(line.count('CHOOSE') for line in text.splitlines() if not line.startswith('#'))
    assert choices == 8, text                              # two types and two shapes: the person's choices
    unfilled = run_cli('doctor', '--config', str(draft), bag)
    assert unfilled.returncode == 2 and 'entities' in unfilled.stderr, unfilled.stderr
    filled = text.replace("cube: {type: CHOOSE", "cube: {type: cube").replace(
        "table: {type: CHOOSE", "table: {type: table, roles: [support]").replace(
        "bodies: [cube_main], frame: cube_main, shape: {box: [CHOOSE, CHOOSE, CHOOSE]}",
        "bodies: [cube_main], frame: cube_main, shape: {box: [0.021, 0.021, 0.021]}").replace(
        "shape: {box: [CHOOSE, CHOOSE, CHOOSE]}", "shape: {box: [0.4, 0.4, 0.025]}")
    assert not any('CHOOSE' in line for line in filled.splitlines() if not line.startswith('#'))
    draft.write_text(filled)
    ok = run_cli('doctor', '--config', str(draft), bag)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert 'every configured name matches' in ok.stdout
    again = run_cli('config', 'init', '--from-bag', bag, '--out', str(draft))
    assert again.returncode == 2 and 'exists' in again.stderr


def test_stacking_configuration_grounds_support_on_physics(tmp_path):
    """Cube A stacked on cube B, configured only with body frames and shapes:
    supported on the table at the start, not in mid-air, supported by cube B
    at the end; cube B gets no per-object predicates (scene role)."""
    stack_world = SimWorld('Stack', seed=2)
    try:
        truth = run_rollout(stack_world, RolloutSpec('Stack', 'none', 2), tmp_path)
    finally:
        stack_world.close()
    robot = load_robot_config(REPO / 'config' / 'robots' / 'robosuite_stack.yaml')
    grounding = GroundingSet(robot, False, False)
    ts = typestore()
    supported: list[bool | None] = []
    with Reader(tmp_path / 'stack_none_002') as reader:
        for conn, t_ns, raw in reader.messages():
            grounding.feed(conn.topic, ts.deserialize_cdr(raw, conn.msgtype))
            if conn.topic == '/contacts':
                values = grounding.evaluate(t_ns * 1e-9)
                assert 'object_supported_cube_b' not in values
                supported.append(values['object_supported_cube_a'])
    assert len(supported) == truth.frames
    assert supported[5] is True                        # on the table
    assert False in supported[60:130]                  # lifted: mid-air
    assert all(v is True for v in supported[-20:])     # resting on cube B


def test_bridge_publishes_a_camera_stream(tmp_path):
    """With a GL back-end (Mesa EGL here), the bridge renders robosuite's
    agentview camera as an RGB-D driver publishes it: sensor_msgs/Image (rgb8,
    and 32FC1 depth in metres from the same render and stamp) + CameraInfo and
    the optical frame on /tf."""
    import subprocess
    import sys
    import time

    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import CameraInfo, Image
    from tf2_msgs.msg import TFMessage

    with ros_node('camera_listener') as (node, ex):
        got: dict = {}
        node.create_subscription(Image, 'image', lambda m: got.setdefault('image', m), qos_profile_sensor_data)
        node.create_subscription(CameraInfo, 'camera_info', lambda m: got.setdefault('info', m), qos_profile_sensor_data)
        node.create_subscription(Image, 'depth', lambda m: got.setdefault('depth', m), qos_profile_sensor_data)
        node.create_subscription(TFMessage, '/tf', lambda m: [got.setdefault('tf', t) for t in m.transforms
                                                              if t.child_frame_id == 'agentview_optical'], 100)
        bridge = subprocess.Popen([sys.executable, '-c', 'import sys; from safemanip_ros.nodes.sim_bridge import main; '
                                   'sys.exit(main())', '--ros-args', '-p', 'camera:=agentview', '-p',
                                   'wait_for_subscribers:=0', '-p', 'max_held_s:=0.1'],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not {'image', 'depth', 'info', 'tf'} <= set(got) \
                    and bridge.poll() is None:
                ex.spin_once(timeout_sec=0.1)
        finally:
            bridge.terminate()
            out = bridge.communicate(timeout=60)[0]
    assert {'image', 'info', 'tf'} <= set(got), out[-2000:]
    img, info = got['image'], got['info']
    assert (img.encoding, img.height, img.width, img.step, len(img.data)) == ('rgb8', 128, 128, 384, 128 * 128 * 3)
    pixels = np.frombuffer(bytes(img.data), np.uint8)
    assert pixels.std() > 5                                   # a scene, not a blank frame
    assert info.k[0] == pytest.approx(64 / np.tan(np.radians(45) / 2), rel=1e-6) and info.k[2] == 64
    assert img.header.frame_id == info.header.frame_id == 'agentview_optical'
    depth = got['depth']
    assert (depth.encoding, depth.step, depth.header.stamp) == ('32FC1', 128 * 4, img.header.stamp)
    metres = np.frombuffer(bytes(depth.data), '<f4').reshape(128, 128)
    # The table under the camera's centre: about 1.1 m along the optical axis of agentview (1.35 m up, tilted).
    assert np.isfinite(metres).all() and 0.5 < float(metres[64, 64]) < 2.0, metres[64, 64]


def test_pick_and_place_preconditions_on_physics(tmp_path):
    """PickPlace: the Can put down in the source bin between two objects (a
    place whose support region is occupied) and a clean pick that robosuite's
    bin set against the Milk (a pick in clutter, labelled by the physics):
    each caught by the precondition property meant for it, at once."""
    from safemanip_ros.audit.engine import AuditConfig, run_audit
    from safemanip_ros.audit.report import build_report
    from safemanip_ros.resources import default_suites
    world = SimWorld('PickPlace')
    bags = []
    try:
        for fault, seed in (('place_in_clutter', 102), ('none', 106)):
            spec = RolloutSpec('PickPlace', fault, seed)
            run_rollout(world, spec, tmp_path)
            bags.append(tmp_path / spec.name)
    finally:
        world.close()
    assert [e['event'] for e in read_truth(bags[0])['events']] == ['place_in_clutter']
    assert [e['event'] for e in read_truth(bags[1])['events']] == ['pick_in_clutter']
    cfg = AuditConfig(tuple(str(p) for p in default_suites()),
                      robot_config=str(REPO / 'config' / 'robots' / 'robosuite_pickplace.yaml'))
    results, skipped = run_audit([str(b) for b in bags], cfg, tmp_path / 'audit', 1)
    assert not skipped
    result = score(build_report(results, skipped, {'reduction': 'any'}), bags)
    table = format_table(result)
    assert result['sensitivity'] == 1.0, table
    props = result['properties']
    assert props['place_preconditions_safe']['detected'] == 1, table
    assert props['place_preconditions_safe']['median_latency_frames'] == 0, table
    assert props['pick_preconditions_safe']['detected'] == 1, table
    assert props['pick_preconditions_safe']['median_latency_frames'] <= 10 + 3, table


def test_bridge_serves_follow_joint_trajectory_and_a_cancel_holds(tmp_path):
    """The bridge is a joint_trajectory_controller to the supervisor: a
    FollowJointTrajectory goal moves the arm (the policy suspended) and a
    cancel holds it where it is measured (result CANCELED)."""
    import subprocess
    import sys
    import time

    from action_msgs.msg import GoalStatus
    from builtin_interfaces.msg import Duration
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import ActionClient
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectoryPoint

    with ros_node('goal_sender') as (node, ex):
        latest: dict = {}
        node.create_subscription(JointState, 'fjt/joint_states', lambda m: latest.update(
            q=dict(zip(m.name, m.position)), t=m.header.stamp.sec + m.header.stamp.nanosec * 1e-9), 10)
        client = ActionClient(node, FollowJointTrajectory, '/fjt/arm_controller/follow_joint_trajectory')
        bridge = subprocess.Popen([sys.executable, '-c', 'import sys; from safemanip_ros.nodes.sim_bridge import main; '
                                   'sys.exit(main())', '--ros-args', '-r', '__ns:=/fjt', '-p', 'wait_for_subscribers:=1',
                                   '-p', 'max_held_s:=60.0', '-p', 'trajectory_action:=arm_controller/follow_joint_trajectory'],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def spin_until(cond, timeout_s=120.0) -> bool:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and bridge.poll() is None:
                ex.spin_once(timeout_sec=0.05)
                if cond():
                    return True
            return cond()
        try:
            assert spin_until(lambda: 'q' in latest and client.server_is_ready())
            arm = [f'robot0_joint{i}' for i in range(1, 8)]
            start = [latest['q'][j] for j in arm]
            goal = FollowJointTrajectory.Goal()
            goal.trajectory.joint_names = arm
            goal.trajectory.points = [JointTrajectoryPoint(positions=[start[0] + 0.6] + start[1:],
                                                           time_from_start=Duration(sec=6))]
            sent = client.send_goal_async(goal)
            assert spin_until(sent.done) and sent.result().accepted
            handle = sent.result()
            assert spin_until(lambda: abs(latest['q'][arm[0]] - start[0]) > 0.05), latest
            canceled = handle.cancel_goal_async()
            assert spin_until(canceled.done) and len(canceled.result().goals_canceling) == 1
            result = handle.get_result_async()
            assert spin_until(result.done) and result.result().status == GoalStatus.STATUS_CANCELED
            # The arm settles on the held position within a few simulated steps; the samples this
            # process has seen by now may still be older than the cancel on a loaded machine.
            t_cancel = latest['t']
            assert spin_until(lambda: latest['t'] - t_cancel >= 0.5)
            t0, q0 = latest['t'], latest['q'][arm[0]]
            assert spin_until(lambda: latest['t'] - t0 >= 1.0)
            # Held: the joint moves less in the next simulated second than the goal moved it in 0.1 s.
            assert abs(latest['q'][arm[0]] - q0) < 0.01, (q0, latest['q'][arm[0]])
            # A goal without the arm's joints is rejected, as the real controller does.
            bad = FollowJointTrajectory.Goal()
            bad.trajectory.joint_names = ['nope']
            bad.trajectory.points = [JointTrajectoryPoint(positions=[0.0])]
            refused = client.send_goal_async(bad)
            assert spin_until(refused.done) and not refused.result().accepted
        finally:
            bridge.terminate()
            out = bridge.communicate(timeout=60)[0]
            client.destroy()
    assert 'Traceback' not in out, out[-3000:]


def test_skill_events_decide_the_pick_onset_and_name_the_object_judged(tmp_path):
    """PickPlace seed 21: the Can lies against the Cereal box (within 1 cm)
    the whole rollout, and the scripted pick descends and closes beside it
    without reaching it.  The geometric onset (gripper within 5 cm) never
    fires; with the policy's phases as skill events the pick starts at
    `descend`, its precondition is judged on the Can the skill names (not
    on whatever is nearest the far-away gripper), and the audit flags it."""
    from safemanip_ros.audit.engine import AuditConfig, run_audit
    from safemanip_ros.audit.rollouts import read_bag
    from safemanip_ros.resources import config_path, default_suites
    from safemanip_ros.sim.faithfulness import skills_config

    world = SimWorld('PickPlace', seed=21)
    try:
        run_rollout(world, RolloutSpec('PickPlace', 'none', 21), tmp_path)
    finally:
        world.close()
    bag = tmp_path / 'pickplace_none_021'
    skills = skills_config('PickPlace', tmp_path / 'configs')
    robot = load_robot_config(skills)
    names = ['pick_approach', 'pick_target_can', 'preconditions_satisfied_pick']
    (rollout,) = read_bag(bag, names, 20.0, 0.5, robot=robot)
    known = ~rollout.unknown
    picking = rollout.values[:, 0] & known[:, 0]
    assert picking.sum() > 20 and (rollout.values[:, 1] == picking).all()      # the pick names the Can
    assert not (rollout.values[picking, 2] & known[picking, 2]).any()          # judged on it: never clear
    found = {}
    for name, robot_config in (('skills', skills), ('geometry', config_path('robots', 'robosuite_pickplace.yaml'))):
        cfg = AuditConfig(tuple(str(p) for p in default_suites()), robot_config=str(robot_config),
                          only=('pick_preconditions_safe',))
        results, skipped = run_audit([str(bag)], cfg, tmp_path / f'audit_{name}', 1)
        assert not skipped
        found[name] = sum(i['violations'] for r in results for e in r['episodes'] for i in e['instances']
                          if i['instance'] == 'pick_preconditions_safe')
    assert found == {'skills': 1, 'geometry': 0}


def test_a_seed_builds_the_same_world_every_time(world):
    """robosuite draws the Lift cube's size when it builds the model: from
    the seed, so the same seed is the same rollout in any process (it was
    drawn unseeded: another cube every time)."""
    a, b, c = SimWorld('Lift', seed=11), SimWorld('Lift', seed=11), SimWorld('Lift', seed=12)
    try:
        assert np.array_equal(a.env.cube.size, b.env.cube.size)
        assert not np.array_equal(a.env.cube.size, c.env.cube.size)
        sa, sb = a.reset(), b.reset()
        assert all(np.array_equal(sa.poses[k][i], sb.poses[k][i]) for k in sa.poses for i in (0, 1))
    finally:
        for w in (a, b, c):
            w.close()


def _bridge(*args: str, stdin: str | None = None):
    import subprocess
    import sys
    return subprocess.run([sys.executable, '-c', 'import sys; from safemanip_ros.nodes.sim_bridge import main; '
                           'sys.exit(main())', *args], input=stdin, capture_output=True, text=True, timeout=300)


def test_a_served_rollout_is_the_rollout_sim_bridge_runs_alone(tmp_path):
    """``sim_bridge --serve``: one rollout per request line, each in a new
    world and ROS context, answered with its exit code; the second rollout
    of a server gives the same ground truth as ``sim_bridge`` alone (no
    stack: nothing holds the arm), and its output goes to its own log."""
    fast = ['-p', 'wait_for_subscribers:=0', '-p', 'real_time_factor:=0.1']
    alone = _bridge('--ros-args', *fast, '-p', 'fault:=midair_drop', '-p', 'seed:=5',
                    '-p', f'truth_file:={tmp_path / "alone.json"}')
    assert alone.returncode == 0, alone.stderr[-2000:]
    requests = [{'ros_args': ['-p', 'fault:=drag', '-p', 'seed:=1', '-p', f'truth_file:={tmp_path / "first.json"}'],
                 'log': str(tmp_path / 'first.log')},
                {'ros_args': ['-p', 'fault:=midair_drop', '-p', 'seed:=5',
                              '-p', f'truth_file:={tmp_path / "served.json"}'], 'log': str(tmp_path / 'served.log')}]
    served = _bridge('--serve', '--ros-args', *fast, stdin=''.join(json.dumps(r) + '\n' for r in requests))
    assert served.returncode == 0, served.stderr[-2000:]
    assert [json.loads(line) for line in served.stdout.splitlines()] == [{'exit_code': 0}, {'exit_code': 0}]
    assert json.loads((tmp_path / 'served.json').read_text()) == json.loads((tmp_path / 'alone.json').read_text())
    assert 'rollout Lift/drag/seed 1 starts' in (tmp_path / 'first.log').read_text()
    assert 'rollout Lift/midair_drop/seed 5 starts' in (tmp_path / 'served.log').read_text()


@pytest.mark.parametrize('args, stdin, words', [
    (['--serve'], 'not json\n', ['a request is {"ros_args": [...], "log": PATH}', "'not json'"]),
    (['--serve'], '{"ros_args": "-p seed:=1", "log": "x"}\n', ['ros_args is not a list']),
    (['--rollouts', '3'], None, ["unknown arguments ['--rollouts', '3']", 'usage: sim_bridge [--serve]']),
])
def test_sim_bridge_refuses_what_it_cannot_run_in_one_line(args, stdin, words):
    proc = _bridge(*args, stdin=stdin)
    assert proc.returncode == 2 and proc.stdout == '', proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and all(w in proc.stderr for w in words), proc.stderr


def test_sim_bridge_serve_ends_at_the_end_of_its_requests():
    proc = _bridge('--serve', stdin='')
    assert proc.returncode == 0 and proc.stdout == '' and proc.stderr == '', proc.stderr


def test_the_camera_level_finds_the_cube_in_rendered_pixels_and_the_audit_sees_the_drop(tmp_path, monkeypatch):
    """The camera perception level: the agentview camera rendered RGB-D
    (EGL, no GPU), the cube found by colour and depth every 0.1 s, published
    100 ms after the capture stamped with it, within a centimetre of the
    truth; audited with the shipped configuration, the mid-air drop is seen."""
    import safemanip_ros.sim.recording as recording
    from safemanip_ros.audit.engine import AuditConfig, audit_source
    from safemanip_ros.resources import default_suites
    from safemanip_ros.sim.perception import LEVELS
    made = []

    def keep(*args, **kwargs):
        made.append(recording.camera_detector.__wrapped__(*args, **kwargs))
        return made[-1]
    keep.__wrapped__ = recording.camera_detector
    monkeypatch.setattr(recording, 'camera_detector', keep)
    level = LEVELS['camera']
    world = SimWorld('Lift', seed=5, camera=level.camera)
    try:
        truth = recording.run_rollout(world, RolloutSpec('Lift', 'midair_drop', 5), tmp_path, perception=level)
    finally:
        world.close()
    (detector,) = made
    errors = np.array(detector.errors_m)
    assert len(detector.seconds) == pytest.approx(truth.frames / 2, abs=2)        # 10 Hz of a 20 Hz rollout
    assert len(errors) >= 0.8 * len(detector.seconds) and np.median(errors) < 0.005 and errors.max() < 0.015
    bag = tmp_path / 'lift_midair_drop_005'
    ts = typestore()
    with Reader(bag) as reader:
        conn = next(c for c in reader.connections if c.topic == '/tf')
        seen = [(t, ts.deserialize_cdr(raw, conn.msgtype)) for _, t, raw in reader.messages(connections=[conn])]
    cube = [(t, m.transforms[0]) for t, m in seen if m.transforms[0].child_frame_id == 'cube_main']
    assert 0 <= len(errors) - len(cube) <= 2          # the captures of the last 100 ms end with the rollout
    for t_ns, tr in cube:          # stamped with the capture, in the bag 100 ms later, no orientation claimed
        stamp_ns = tr.header.stamp.sec * 10**9 + tr.header.stamp.nanosec
        assert t_ns - stamp_ns == pytest.approx(100_000_000, abs=1_000_000)
        assert (tr.transform.rotation.x, tr.transform.rotation.w) == (0.0, 1.0)
    cfg = AuditConfig(tuple(str(p) for p in default_suites()), robot_config=str(ROBOT))
    result = audit_source(str(bag), cfg)
    violated = {i['instance'] for ep in result['episodes'] for i in ep['instances'] if i['violations']}
    assert any('release_only_over_support' in v or 'drop' in v for v in violated), violated
    # The pixels are in the bag as an RGB-D driver publishes them, one pair and CameraInfo per capture, the
    # optical frame on /tf_static; found again offline, the objects give the same violations.
    with Reader(bag) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
    assert counts['/image'] == counts['/depth'] == counts['/camera_info'] == len(detector.seconds), counts
    again = audit_source(str(bag), replace(cfg, objects_from_images=True))
    assert {i['instance'] for ep in again['episodes'] for i in ep['instances'] if i['violations']} == violated
    # The rollout's truth file keeps what the camera cost and how far off it was; the bench sums them per level.
    from safemanip_ros.sim.faithfulness import camera_figures, camera_line
    figures = camera_figures([bag])
    assert f'camera: {len(detector.seconds)} captures' in camera_line('camera', figures)
    assert figures['captures'] == len(detector.seconds) and figures['detections'] == len(errors)
    assert figures['error_mm_median'] == pytest.approx(np.median(errors) * 1e3, abs=0.01)
    assert 1 < figures['capture_ms_median'] < 2000 and figures['missed'] == detector.missed


@pytest.mark.parametrize('seed', [3, 11])
def test_the_camera_level_tells_pickplaces_red_can_from_its_red_box_by_hue(seed):
    """PickPlace at the camera level, with the shipped configuration's colours: the Can (hue 172-180), the
    Cereal box (2-7) and the Bread (8-12) are each found in the rendered agentview pixels, each nearer its
    own object than any other (a red can is not taken for the red box), and the white Milk carton is not
    claimed by any colour."""
    from safemanip_ros.grounding.colour_depth import locate
    from safemanip_ros.sim.perception import LEVELS
    level = LEVELS['camera']
    looks = load_robot_config(REPO / 'config' / 'robots' / 'robosuite_pickplace.yaml').camera.objects
    assert sorted(look.name for look in looks) == ['Bread_main', 'Can_main', 'Cereal_main']
    world = SimWorld('PickPlace', seed=seed, camera=level.camera)
    try:
        world.seed = seed
        sample = world.reset()
        for _ in range(30):                      # the objects settle in the bin
            sample = world.step(np.zeros(7))
        n = level.camera_size_px
        rgb, depth = world.render_rgbd(n, n)
        found = locate(rgb, depth, world.camera_intrinsics(n, n), world.camera_optical_pose(), looks)
    finally:
        world.close()
    objects = ('Can_main', 'Cereal_main', 'Bread_main', 'Milk_main')
    for look in looks:
        assert look.name in found, (look.name, sorted(found))
        off_m = {o: float(np.linalg.norm(np.subtract(found[look.name].position_m, sample.poses[o][0])))
                 for o in objects}
        assert min(off_m, key=off_m.get) == look.name and off_m[look.name] < 0.07, (look.name, off_m)


def test_camera_grounding_finds_the_cube_in_the_bridges_rgbd_frames(tmp_path):
    """A cell's perception path over DDS: the bridge publishes its camera as
    an RGB-D driver does (image, depth, camera_info, the optical frame on
    /tf); ``camera_grounding`` with the Lift configuration's ``camera.objects``
    pairs image and depth by stamp, places the cube in the world through the
    camera's pose on /tf and publishes world → cube upright, stamped with the
    capture: each within 1.5 cm of the cube's true pose.  (Its frame is
    renamed here, ``cube_seen``, so the bridge's true ``cube_main`` on the
    same /tf stays apart.)"""
    import subprocess
    import sys
    import time

    from tf2_msgs.msg import TFMessage

    def stamp(t) -> int:
        return t.header.stamp.sec * 10**9 + t.header.stamp.nanosec

    def position(t) -> np.ndarray:
        tr = t.transform.translation
        return np.array([tr.x, tr.y, tr.z])

    config = tmp_path / 'lift.yaml'
    text = (REPO / 'config' / 'robots' / 'robosuite_lift.yaml').read_text()
    config.write_text(text.replace('bodies: [cube_main], frame: cube_main', 'bodies: [cube_main], frame: cube_seen'))
    truth: dict[int, np.ndarray] = {}
    found: list = []

    def heard(m) -> None:
        for t in m.transforms:
            if t.child_frame_id == 'cube_main':
                truth[stamp(t)] = position(t)
            elif t.child_frame_id == 'cube_seen':
                found.append(t)
    with ros_node('camera_objects_listener') as (node, ex):
        node.create_subscription(TFMessage, '/tf', heard, 1000)
        code = 'import sys; from safemanip_ros.nodes.{} import {} as main; sys.exit(main())'
        grounding = subprocess.Popen([sys.executable, '-c', code.format('grounding_nodes', 'camera_main'), '--ros-args',
                                      '-p', f'config:={config}'],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        bridge = subprocess.Popen([sys.executable, '-c', code.format('sim_bridge', 'main'), '--ros-args', '-p',
                                   'camera:=agentview', '-p', 'camera_every_frames:=2', '-p', 'wait_for_subscribers:=0',
                                   '-p', 'max_held_s:=0.1'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and len(found) < 20 and bridge.poll() is None:
                ex.spin_once(timeout_sec=0.1)
        finally:
            bridge.terminate()
            grounding.terminate()
            out = bridge.communicate(timeout=60)[0] + grounding.communicate(timeout=60)[0]
    assert len(found) >= 5, out[-3000:]
    errors = []
    for t in found:
        assert t.header.frame_id == 'world'
        q = t.transform.rotation
        assert (q.x, q.y, q.z, q.w) == (0.0, 0.0, 0.0, 1.0)          # upright in the world: no orientation claimed
        if stamp(t) in truth:
            errors.append(float(np.linalg.norm(position(t) - truth[stamp(t)])))
    assert len(errors) >= 5 and max(errors) < 0.015, errors
