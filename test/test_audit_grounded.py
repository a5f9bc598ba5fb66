"""Raw-input bags grounded column-wise (safemanip_ros/audit/grounded.py)
build the very frames the message-by-message loop builds: same rollouts,
values, unknowns and warnings.  The bags are generated (seeded) to cover
what the grounding keeps from message to message and frame to frame, and
the cases the columnar path must hand back to the loop."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from safemanip_ros.audit.grounded import grounded_rollouts
from safemanip_ros.audit.rollouts import read_bag
from safemanip_ros.bag.typestore import typestore
from safemanip_ros.bag.writer import SplitBagWriter
from safemanip_ros.grounding.config import load_robot_config
from safemanip_ros.grounding.messages import GroundingSet

ROBOT = REPO / 'config' / 'robots' / 'robosuite_lift.yaml'
ARM = [f'robot0_joint{i}' for i in range(1, 8)]
FINGERS = ['gripper0_right_finger_joint1', 'gripper0_right_finger_joint2']
FINGER_BODIES = ['gripper0_right_leftfinger', 'gripper0_right_rightfinger']


def _yaw(deg: float) -> tuple[float, float, float, float]:
    a = math.radians(deg) / 2
    return 0.0, 0.0, math.sin(a), math.cos(a)


@dataclass(frozen=True)
class Knobs:
    """How often each input misbehaves in a generated rollout (the defaults
    are the seeded tests' rates): messages missing (dropouts), NaN values,
    and a stall of each stream (frames ``[stall_at, stall_at + stall_frames)``
    without it: stale inputs)."""

    js_missing: float = 0.05
    js_nan: float = 0.04            # a NaN or inf position (of the malformed cases' share)
    js_stall_frames: int = 0
    tf_missing: float = 0.04
    tf_stall_frames: int = 8
    hinge_nan: float = 1 / 13
    contacts_missing: float = 0.05
    force_nan: float = 0.03
    wrench_missing: float = 0.1
    wrench_nan: float = 0.05
    stall_at: int = 40


def _write(path: Path, seed: int, *, break_with: str | None = None, gap_s: float = 0.0, n: int = 120,
           extras: bool = False, knobs: Knobs = Knobs(), perceived: bool = False) -> None:
    """A Lift-like rollout: the arm reaches, the fingers close on the cube
    (contacts come and go, some below the force threshold, one NaN force),
    lift, release; joint states sometimes reordered, without velocities,
    NaN, missing a finger or malformed; TF with the eef appearing late, the
    table static and sent late, stamps behind bag time; input streams that
    stall past their staleness.  ``break_with`` adds one thing the columnar
    path must leave to the loop; ``gap_s`` a hole in the recording; ``n``
    frames of 50 ms (over 200: longer than the TF buffer, which trims);
    ``extras``: a microwave whose door hinge is in the joint states (a
    fixture, sometimes missing or NaN) and whose frame is in TF, and a
    force/torque sensor on ``/wrench`` (forces across the thresholds, NaN
    now and then); ``perceived``: the cube's pose from a detector instead,
    in its own ``/tf`` messages at 10 Hz, 15 % missed, 5 mm noise, stamped
    100 ms before the robot's links it arrives after."""
    ts = typestore()
    rng = np.random.default_rng(seed)
    T = ts.types['builtin_interfaces/msg/Time']
    Header = ts.types['std_msgs/msg/Header']
    JS = ts.types['sensor_msgs/msg/JointState']
    TFM, TS, Tr = (ts.types[n] for n in ('tf2_msgs/msg/TFMessage', 'geometry_msgs/msg/TransformStamped',
                                         'geometry_msgs/msg/Transform'))
    V3, Q = ts.types['geometry_msgs/msg/Vector3'], ts.types['geometry_msgs/msg/Quaternion']
    Contact, CA, Point = (ts.types[n] for n in ('safemanip_ros/msg/Contact', 'safemanip_ros/msg/ContactArray',
                                                'geometry_msgs/msg/Point'))

    def stamp(t: float):
        ns = int(round(t * 1e9))
        return T(sec=ns // 10**9, nanosec=ns % 10**9)

    def transform(parent: str, child: str, t: float, xyz, q):
        return TS(header=Header(stamp=stamp(t), frame_id=parent), child_frame_id=child,
                  transform=Tr(translation=V3(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2])),
                               rotation=Q(x=q[0], y=q[1], z=q[2], w=q[3])))

    w = SplitBagWriter(path, 'mcap', split_s=10.0**10)
    for topic, msgtype in (('/joint_states', 'sensor_msgs/msg/JointState'), ('/tf', 'tf2_msgs/msg/TFMessage'),
                           ('/tf_static', 'tf2_msgs/msg/TFMessage'), ('/contacts', 'safemanip_ros/msg/ContactArray')):
        w.add_topic(topic, msgtype)
    if extras:
        w.add_topic('/wrench', 'geometry_msgs/msg/WrenchStamped')
    Wrench, WS = ts.types['geometry_msgs/msg/Wrench'], ts.types['geometry_msgs/msg/WrenchStamped']
    hinge = 0.0
    cube = np.array([0.0, 0.0, 0.8 + 0.021])
    eef = np.array([0.1, 0.0, 1.0])
    closed, q_arm, yaw = False, np.zeros(7), 0.0
    t0 = 100.0
    for k in range(n):
        t = t0 + k * 0.05 + (gap_s if k >= n // 2 else 0.0)
        bag_ns = int(round((t + float(rng.uniform(0.0, 0.03))) * 1e9))
        phase = k / n
        # Reach, grasp, lift, set down, release.
        target = cube + [0, 0, 0.0] if phase < 0.3 else eef
        eef = eef + (target - eef) * 0.2 + rng.normal(0, 0.002, 3)
        closed = 0.3 <= phase < 0.8
        if 0.35 <= phase < 0.6:
            cube = eef - [0, 0, 0.0] + rng.normal(0, float(rng.choice([0.0, 0.004, 0.03])), 3)
            cube[2] = max(cube[2], 0.8 + 0.021)
            yaw += float(rng.normal(0, 10))
        elif phase >= 0.6 and rng.random() < 0.2:
            cube = cube + [float(rng.normal(0, 0.01)), 0.0, 0.0]          # dragged
        q_arm = q_arm + rng.normal(0, float(rng.choice([0.0005, 0.01, 0.2])), 7)
        finger = 0.01 if closed else 0.04
        finger += float(rng.normal(0, 0.002))
        js_stalled = knobs.stall_at <= k < knobs.stall_at + knobs.js_stall_frames
        if rng.random() > knobs.js_missing and not js_stalled:     # a joint-state message now and then missing
            names = ARM + FINGERS
            pos = list(q_arm) + [finger, -finger]
            if extras and rng.random() > 0.05:
                hinge = float(np.clip(hinge + (-0.04 if k < n // 2 else 0.04) + rng.choice([0.0, -0.05, 0.05, -0.0005]),
                                    -1.6, 0.0))          # the door opens, then closes
                names, pos = names + ['microwave_door_hinge'], pos + [hinge if rng.random() >= knobs.hinge_nan
                                                                       else math.nan]
            r = rng.random()
            if r < 0.1:
                order = rng.permutation(len(names))
                names, pos = [names[i] for i in order], [pos[i] for i in order]
            elif r < 0.1 + knobs.js_nan:
                pos[int(rng.integers(len(pos)))] = float(rng.choice([math.nan, math.inf]))
            elif r < 0.13 + knobs.js_nan:
                names, pos = names[:-1], pos[:-1]    # a finger missing
            elif r < 0.15 + knobs.js_nan:
                pos = pos[:-2]                       # malformed: fewer positions than names
            vel = list(rng.normal(0, 0.05, len(names))) if rng.random() < 0.5 else []
            js_t = t - float(rng.uniform(0, 0.02))
            if break_with == 'joint_order' and k == 60:
                js_t -= 0.5                          # dropped as out of order by the live class
            w.write('/joint_states', bag_ns, ts.serialize_cdr(JS(
                header=Header(stamp=stamp(js_t), frame_id=''), name=names, position=np.array(pos, float),
                velocity=np.array(vel, float), effort=np.zeros(0)), 'sensor_msgs/msg/JointState'))
        tf_stalled = knobs.stall_at <= k < knobs.stall_at + knobs.tf_stall_frames
        if rng.random() > knobs.tf_missing and not tf_stalled:      # TF stalls (stale frames)
            tf_t = t - float(rng.uniform(0, 0.01))
            items = [] if perceived else [transform('world', 'cube_main', tf_t, cube, _yaw(yaw))]
            if k >= 5:                                    # the eef's link appears late
                items.append(transform('world', 'gripper0_right_eef', tf_t, eef, _yaw(0)))
            if extras:
                items.append(transform('world', 'microwave_main', tf_t, [0.05, 0.0, 0.8], _yaw(0)))
            if perceived and k % 2 == 0 and rng.random() > 0.15:
                detection = TFM(transforms=[transform('world', 'cube_main', tf_t - 0.1, cube + rng.normal(0, 0.005, 3),
                                                      _yaw(yaw))])
                w.write('/tf', bag_ns, ts.serialize_cdr(detection, 'tf2_msgs/msg/TFMessage'))
            if break_with == 'late_beyond_jump' and k == 70:     # stamped 1.5 s back: a clock reset
                w.write('/tf', bag_ns, ts.serialize_cdr(TFM(transforms=[
                    transform('world', 'cube_main', tf_t - 1.5, cube, _yaw(yaw))]), 'tf2_msgs/msg/TFMessage'))
            if break_with == 'nan_tf' and k == 70:
                items[0] = transform('world', 'cube_main', tf_t, [math.nan, 0, 0], _yaw(0))
            if break_with == 'reparent' and k == 70:
                items.append(transform('gripper0_right_eef', 'cube_main', tf_t, [0, 0, -0.05], _yaw(0)))
            w.write('/tf', bag_ns, ts.serialize_cdr(TFM(transforms=items), 'tf2_msgs/msg/TFMessage'))
        if k in (3, 90):                                  # the table, late, and sent again
            w.write('/tf_static', bag_ns, ts.serialize_cdr(TFM(transforms=[
                transform('world', 'table', t, [0, 0, 0.8 - 0.025 + (0.0 if k == 3 else 0.001)], _yaw(0))]),
                'tf2_msgs/msg/TFMessage'))
        contacts = []
        if closed and rng.random() > 0.1:
            for body in FINGER_BODIES[:int(rng.integers(1, 3)) if rng.random() < 0.2 else 2]:
                contacts.append((body, 'cube_main', float(rng.choice([5.0, 0.0, 2.0]))))
        if phase < 0.35 or phase > 0.75:
            contacts.append(('cube_main', 'table', 3.0))
        if rng.random() < 0.05:
            contacts.append(('robot0_link4', 'mystery_body', 1.0))
        if rng.random() < knobs.force_nan:
            contacts.append(('robot0_link5', 'table', math.nan))
        if rng.random() > knobs.contacts_missing:
            w.write('/contacts', bag_ns, ts.serialize_cdr(CA(header=Header(stamp=stamp(t), frame_id=''), contacts=[
                Contact(body1=a, body2=b, position=Point(x=0.0, y=0.0, z=0.0), normal=V3(x=0.0, y=0.0, z=1.0),
                        normal_force_n=f, depth_m=0.0) for a, b, f in contacts]), 'safemanip_ros/msg/ContactArray'))
        if extras and rng.random() > knobs.wrench_missing:
            f = rng.normal(0, float(rng.choice([1.0, 8.0])), 6)
            if rng.random() < knobs.wrench_nan:
                f[int(rng.integers(6))] = math.nan
            w.write('/wrench', bag_ns, ts.serialize_cdr(WS(header=Header(stamp=stamp(t), frame_id='ft'), wrench=Wrench(
                force=V3(x=f[0], y=f[1], z=f[2]), torque=V3(x=f[3], y=f[4], z=f[5]))),
                'geometry_msgs/msg/WrenchStamped'))
    w.close()


def _names(robot) -> list[str]:
    g = GroundingSet(robot, True, False)
    assert g.wrench is not None
    return list(dict.fromkeys(list(g.joints.config.predicate_names) + g.fixtures.names + g.contacts.names +
                              g.tf.names + list(g.wrench.names)))


def _compare(path: Path, robot, names: list[str], max_gap_s: float = 10.0) -> int:
    fast = read_bag(path, names, 20.0, 0.3, robot, max_gap_s=max_gap_s)
    slow = read_bag(path, names, 20.0, 0.3, robot, max_gap_s=max_gap_s, columnar=False)
    assert [e.name for e in fast] == [e.name for e in slow]
    assert {e.reader for e in slow} <= {'message loop'}
    for a, b in zip(fast, slow):
        assert a.values.shape == b.values.shape
        diff = np.argwhere((a.values != b.values) | (a.unknown != b.unknown))
        assert not len(diff), [(int(f), names[p], bool(b.values[f, p]), bool(b.unknown[f, p])) for f, p in diff[:8]]
        assert a.warnings == b.warnings
        assert a.frame_ns is not None and np.array_equal(a.frame_ns, b.frame_ns) and len(a.frame_ns) == len(a.values)
    return sum(len(e.values) for e in fast)


def _columnar(path: Path, robot, names: list[str]) -> bool:
    from safemanip_ros.bag import open_bag
    with open_bag(path) as bag:
        conns = [c for c in bag.connections if c.topic != '/clock']
        return grounded_rollouts(path, bag, conns, GroundingSet(robot, False, False), names, 20.0, 10.0,
                                 typestore(), []) is not None


def _tight_robot(tmp_path: Path):
    """The Lift configuration with a contact force threshold and staleness
    limits inside the generated stamps' spread (both sides of each limit occur)."""
    text = ROBOT.read_text().replace('staleness_s: {joint_states: 0.2, contacts: 0.2, tf: 0.2}',
                                     'staleness_s: {joint_states: 0.045, contacts: 0.04, tf: 0.05}')
    text = text.replace('thresholds:', 'thresholds:\n  contact_min_force_n: 1.0', 1)
    assert 'contact_min_force_n' in text and 'joint_states: 0.045' in text
    path = tmp_path / 'tight.yaml'
    path.write_text(text)
    return load_robot_config(path)


def _kitchen_robot(tmp_path: Path, tight: bool = False):
    """The Lift configuration with a microwave: a fixture measured by its
    door hinge, an interior, near / inside relations, a wrench threshold
    (``tight``: with the staleness limits and force threshold of :func:`_tight_robot`)."""
    text = ROBOT.read_text()
    if tight:
        text = text.replace('staleness_s: {joint_states: 0.2, contacts: 0.2, tf: 0.2}',
                            'staleness_s: {joint_states: 0.045, contacts: 0.04, tf: 0.05}')
        text = text.replace('thresholds:', 'thresholds:\n  contact_min_force_n: 1.0', 1)
        assert 'contact_min_force_n' in text and 'joint_states: 0.045' in text
    text = text.replace('entities:\n', 'entities:\n  microwave: {type: microwave, bodies: [microwave_body], '
                        'frame: microwave_main}\n', 1)
    text += ('fixtures:\n  microwave: {joint: microwave_door_hinge, closed: 0.0, open: -1.57, '
             'interior: [microwave_main, [-0.2, -0.2, -0.1], [0.2, 0.2, 0.3]]}\n'
             'tf:\n  near:\n    gripper_cube: [gripper0_right_eef, cube_main, 0.05]\n'
             '  inside:\n    cube_in_microwave: [cube_main, microwave_main, [-0.1, -0.1, -0.1], [0.1, 0.1, 0.2]]\n')
    text = text.replace('thresholds:', 'thresholds:\n  force_threshold_n: 10.0\n  torque_threshold_nm: 8.0', 1)
    path = tmp_path / 'kitchen.yaml'
    path.write_text(text)
    return load_robot_config(path)


def test_fixtures_wrench_and_tf_relations_too(tmp_path):
    robot = _kitchen_robot(tmp_path)
    names = _names(robot)
    seen: dict[str, set[str]] = {}
    for seed in range(3):
        path = tmp_path / f'k{seed}'
        _write(path, 20 + seed, extras=True)
        assert _columnar(path, robot, names), seed
        _compare(path, robot, names)
        for ep in read_bag(path, names, 20.0, 0.3, robot):
            assert ep.reader == 'grounded columns', (seed, ep.reader)
            for j, name in enumerate(names):
                seen.setdefault(name, set()).update({'true'} if ep.values[:, j].any() else set())
                seen[name].update({'unknown'} if ep.unknown[:, j].any() else set())
    wanted = ['fixture_fully_open_microwave', 'fixture_fully_closed_microwave', 'fixture_opening_microwave',
              'fixture_closing_microwave', 'contact_force_over_threshold', 'near_gripper_cube',
              'inside_cube_in_microwave', 'reach_in_microwave', 'object_reach_in_microwave']
    assert [n for n in wanted if seen[n] != {'true', 'unknown'}] == []


@pytest.mark.slow
def test_columnar_grounding_builds_the_frames_of_the_message_loop(tmp_path):
    frames = 0
    seen: dict[str, set[str]] = {}            # predicate → {'true', 'unknown'} where it occurs
    for seed in range(6):
        robot = load_robot_config(ROBOT) if seed < 3 else _tight_robot(tmp_path)
        names = _names(robot)
        path = tmp_path / f'ep{seed}'
        _write(path, seed, n=260 if seed == 0 else 120)
        assert _columnar(path, robot, names), seed
        frames += _compare(path, robot, names)
        for ep in read_bag(path, names, 20.0, 0.3, robot):
            for j, name in enumerate(names):
                seen.setdefault(name, set()).update({'true'} if ep.values[:, j].any() else set())
                seen[name].update({'unknown'} if ep.unknown[:, j].any() else set())
    assert frames > 800, frames
    # Values are compared, not only unknowns: these are true somewhere and unknown somewhere.
    wanted = ['arm_moving', 'gripper_closed', 'gripper_opening', 'object_grasped_raw_cube', 'forbidden_contact',
              'object_stable_cube', 'object_supported_cube', 'object_sync_cube', 'gripper_approaching_cube',
              'object_left_gripper_cube', 'object_sliding_cube', 'joint_near_limit']
    assert [n for n in wanted if seen[n] != {'true', 'unknown'}] == []


def test_a_gap_splits_the_rollout_the_same_way(tmp_path):
    robot = load_robot_config(ROBOT)
    names = _names(robot)
    _write(tmp_path / 'gap', 7, gap_s=3.0)
    assert _columnar(tmp_path / 'gap', robot, names)
    _compare(tmp_path / 'gap', robot, names, max_gap_s=1.0)
    eps = read_bag(tmp_path / 'gap', names, 20.0, 0.3, robot, max_gap_s=1.0)
    assert [e.name for e in eps] == ['gap', 'gap#gap1'] and 'rollout split' in eps[0].warnings[0]


def test_a_detector_interleaved_on_tf_is_grounded_column_wise_too(tmp_path):
    """Object poses from a detector arrive on /tf stamped 100 ms before the
    robot's newer links: each link is in order, so the columns reproduce
    the message loop."""
    robot = load_robot_config(ROBOT)
    names = _names(robot)
    for seed in range(3):
        path = tmp_path / f'perceived{seed}'
        _write(path, 20 + seed, perceived=True, n=200)
        assert _columnar(path, robot, names), seed
        assert _compare(path, robot, names) > 150


@pytest.mark.slow
@pytest.mark.parametrize('break_with', ['joint_order', 'nan_tf', 'reparent', 'late_beyond_jump'])
def test_what_the_columns_cannot_reproduce_goes_through_the_message_loop(tmp_path, break_with):
    """A joint state the live class drops as out of order, a NaN transform,
    a re-parented link: the columnar path declines, the loop grounds it."""
    robot = load_robot_config(ROBOT)
    names = _names(robot)
    _write(tmp_path / break_with, 11, break_with=break_with)
    assert not _columnar(tmp_path / break_with, robot, names)
    assert _compare(tmp_path / break_with, robot, names) > 100
    # The grounded-columns reader declined as it read; the choice is said on each rollout.
    assert {ep.reader for ep in read_bag(tmp_path / break_with, names, 20.0, 0.3, robot)} == {'message loop'}


def test_long_recordings_are_grounded_in_bounded_memory(tmp_path, monkeypatch):
    """Past MAX_BYTES of raw messages the columnar path hands the bag to the
    message loop, which evaluates its frames a batch at a time (the TF
    history dropped in between): the frames are still the same."""
    import safemanip_ros.audit.grounded as grounded
    import safemanip_ros.audit.rollouts as rollouts
    robot = load_robot_config(ROBOT)
    names = _names(robot)
    _write(tmp_path / 'long', 5, n=260)
    expected = read_bag(tmp_path / 'long', names, 20.0, 0.3, robot)
    monkeypatch.setattr(grounded, 'MAX_BYTES', 50_000)
    assert not _columnar(tmp_path / 'long', robot, names)
    monkeypatch.setattr(rollouts, '_VIEWED_FRAMES', 7)       # a flush every 7 frames, state carried across
    got = read_bag(tmp_path / 'long', names, 20.0, 0.3, robot)
    assert [e.name for e in got] == [e.name for e in expected]
    for a, b in zip(got, expected):
        assert (a.values == b.values).all() and (a.unknown == b.unknown).all() and a.warnings == b.warnings


@pytest.mark.parametrize('columnar', [True, False])
def test_a_corrupt_raw_bag_is_an_input_error_naming_it(tmp_path, columnar):
    """Bytes overwritten inside the recording's data: an input error (the
    bag package's, or the audit's) that names the bag (the audit lists it
    and goes on), never a crash."""
    from safemanip_ros.audit.rollouts import AuditInputError
    from safemanip_ros.bag import BagError
    robot = load_robot_config(ROBOT)
    names = _names(robot)
    _write(tmp_path / 'bad', 3)
    f = next((tmp_path / 'bad').glob('*.mcap'))
    data = bytearray(f.read_bytes())
    at = len(data) // 3
    data[at:at + 4096] = bytes(range(256)) * 16
    f.write_bytes(bytes(data))
    with pytest.raises((AuditInputError, BagError), match='bad'):
        read_bag(tmp_path / 'bad', names, 20.0, 0.3, robot, columnar=columnar)


_RATE = st.floats(min_value=0.0, max_value=0.6)


@settings(max_examples=int(os.environ.get('SAFEMANIP_GROUNDING_EXAMPLES', '40')), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), tight=st.booleans(), n=st.integers(min_value=60, max_value=220),
       knobs=st.builds(Knobs, js_missing=_RATE, js_nan=st.floats(min_value=0.0, max_value=0.3),
                       js_stall_frames=st.integers(0, 20), tf_missing=_RATE, tf_stall_frames=st.integers(0, 20),
                       hinge_nan=_RATE, contacts_missing=_RATE, force_nan=_RATE, wrench_missing=_RATE,
                       wrench_nan=_RATE, stall_at=st.integers(0, 50)))
@pytest.mark.slow
def test_every_rule_grounds_the_same_frames_both_ways_under_faulty_inputs(tmp_path_factory, seed, tight, n, knobs):
    """The array code of audit/grounded.py against the sample-by-sample
    grounding classes, rule by rule (joints, fixtures, wrench, contacts, TF
    relations), over generated streams with dropouts, NaN values and stalls
    past the staleness limits: the same values and unknowns on every frame."""
    tmp = tmp_path_factory.mktemp('faulty')
    robot = _kitchen_robot(tmp, tight=tight)
    names = _names(robot)
    _write(tmp / 'ep', seed, n=n, extras=True, knobs=knobs)
    assert _columnar(tmp / 'ep', robot, names)
    assert _compare(tmp / 'ep', robot, names) > 0
