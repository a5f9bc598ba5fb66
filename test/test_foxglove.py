"""What Foxglove is shown, who may act, the address and the shipped layout
(safemanip_ros/foxglove): pure code, no server.  The server itself, with a
real Foxglove client over a running stack, is test_foxglove_stack.py."""

from __future__ import annotations

import json
import os

import pytest
from conftest import REPO

from safemanip_ros.errors import FoxgloveError
from safemanip_ros.foxglove.layout import layout_text, state_path
from safemanip_ros.foxglove.operator import OperatorAccess, load_credential
from safemanip_ros.foxglove.scene import EventRecord, ViolationScene, event_json, verdicts_json
from safemanip_ros.foxglove.server import CHANNELS, parse_address
from safemanip_ros.grounding.config import load_robot_config
from safemanip_ros.monitor.board import VerdictBoard

ROBOT = REPO / 'config' / 'robots' / 'panda_demo.yaml'


@pytest.mark.parametrize('text, host, port', [('8765', '127.0.0.1', 8765), ('0.0.0.0:9000', '0.0.0.0', 9000),
                                              ('[::1]:0', '::1', 0), ('localhost:1', 'localhost', 1)])
def test_an_address_is_host_and_port_on_this_machine_unless_named(text, host, port):
    a = parse_address(text)
    assert (a.host, a.port) == (host, port)


@pytest.mark.parametrize('text, words', [('abc', 'the port is not a number'), ('70000', 'outside [0, 65535]'),
                                         ('ws://x:1', 'expected [HOST:]PORT'), (':1', 'expected [HOST:]PORT'),
                                         ('-1', 'outside [0, 65535]')])
def test_a_bad_address_is_one_line_naming_it(text, words):
    with pytest.raises(FoxgloveError, match=words.replace('[', r'\[').replace(']', r'\]')):
        parse_address(text)


def _file(tmp_path, text: str, mode: int = 0o600):
    p = tmp_path / 'credential'
    p.write_text(text)
    os.chmod(p, mode)
    return p


def test_the_operator_credential_is_a_private_line(tmp_path):
    assert load_credential(_file(tmp_path, 'correct horse battery staple\n')) == 'correct horse battery staple'
    for text, mode, words in [('correct horse battery staple\n', 0o644, 'readable by others'),
                              ('short\n', 0o600, 'shorter than 16'),
                              ('correct horse battery staple\nsecond line\n', 0o600, 'one line')]:
        with pytest.raises(FoxgloveError, match=words):
            load_credential(_file(tmp_path, text, mode))
    with pytest.raises(FoxgloveError, match='cannot read'):
        load_credential(tmp_path / 'missing')
    with pytest.raises(FoxgloveError, match='must be a file'):
        load_credential(tmp_path)


def test_a_connection_acts_only_once_it_presented_the_credential():
    access = OperatorAccess('correct horse battery staple')
    assert not access.allows(1) and not access.login(1, 'correct horse battery stapl') and not access.allows(1)
    assert access.login(1, 'correct horse battery staple') and access.allows(1) and not access.allows(2)
    access.forget(1)
    assert not access.allows(1)
    read_only = OperatorAccess(None)
    assert read_only.read_only and not read_only.login(1, '') and not read_only.allows(1)


def test_the_verdict_board_keeps_instances_a_partial_set_does_not_list():
    from types import SimpleNamespace as Msg

    def verdict(instance: str, code: int, mode: int) -> Msg:
        return Msg(property='p', instance=instance, verdict=code, mode=mode, recovery_verdict=2)
    board = VerdictBoard()
    board.update(Msg(episode_id='ep', verdicts=[verdict('p[a]', 3, 0), verdict('p[b]', 3, 0)]))
    board.update(Msg(episode_id='ep', verdicts=[verdict('p[b]', 0, 1)]))        # only what changed
    rows = {r['instance']: r for r in verdicts_json(board, 0, 0)['instances']}
    assert rows['p[a]']['state'] == 'presumably_true' and rows['p[b]']['state'] == 'violated'
    assert rows['p[b]']['verdict'] == 'false' and rows['p[b]']['violated']
    board.update(Msg(episode_id='ep2', verdicts=[verdict('p[b]', 1, 0)]))      # a new rollout's full set
    assert [r['instance'] for r in verdicts_json(board, 0, 0)['instances']] == ['p[b]']
    msg = verdicts_json(board, 1_500_000_000, 30)
    assert msg['timestamp'] == {'sec': 1, 'nsec': 500_000_000} and msg['frame'] == 30 and msg['episode_id'] == 'ep2'


def _event(kind: int, instance: str, binding=(('object', 'mug'),)) -> EventRecord:
    return EventRecord(2_000_000_000, kind, 'prop', instance, tuple(binding), 'physical', 2, 'ep', 10, 12, False, 1)


def test_a_violation_colours_the_objects_it_names_until_it_closes():
    scene = ViolationScene.of_robot(load_robot_config(ROBOT))
    assert scene.entity_frames['mug'] == 'mug_main' and scene.entity_frames['shelf'] == 'shelf_top'
    scene.event(_event(0, 'a[object=mug]'))
    scene.event(_event(0, 'b[object=mug]'))
    scene.event(_event(0, 'c', binding=(('object', 'no_such_thing'),)))     # named, not in the scene: no marker
    update = scene.update(3_000_000_000)
    (mug,) = update['entities']
    assert mug['id'] == 'violation/mug' and mug['frame_id'] == 'mug_main' and mug['frame_locked']
    assert mug['texts'][0]['text'] == 'a[object=mug]\nb[object=mug]' and mug['cubes'][0]['color']['r'] > 0.5
    scene.event(_event(1, 'a[object=mug]'))
    assert [e['id'] for e in scene.update(3_000_000_000)['entities']] == ['violation/mug']    # b still open
    scene.hold(True)
    assert {e['id'] for e in scene.update(3_000_000_000)['entities']} == {'violation/mug', 'hold/gripper'}
    scene.event(_event(1, 'b[object=mug]'))
    scene.hold(False)
    update = scene.update(4_000_000_000)
    # The hold's marker is deleted; the mug's stays, paler, for Foxglove to remove after CLOSED_SHOWN_NS.
    (mug,) = update['entities']
    assert {d['id'] for d in update['deletions']} == {'hold/gripper'}
    assert mug['id'] == 'violation/mug' and mug['lifetime'] == {'sec': 2, 'nsec': 0}
    assert mug['texts'][0]['text'] == 'b[object=mug] (closed)'      # a closed while b kept it marked
    assert scene.update(5_000_000_000) == {'deletions': [], 'entities': []}   # sent once, deleted once
    # A violation that opens and closes between two updates (one frame) is still seen.
    scene.event(_event(0, 'a[object=mug]'))
    scene.event(_event(1, 'a[object=mug]'))
    assert [e['lifetime']['sec'] for e in scene.update(6_000_000_000)['entities']] == [2]


def test_an_event_as_json_says_its_words():
    e = event_json(_event(0, 'a[object=mug]'))
    assert (e['event'], e['severity'], e['binding']) == ('opened', 'error', [{'key': 'object', 'value': 'mug'}])
    json.dumps(e)


def test_the_shipped_layout_is_the_layout_of_the_shipped_suite_on_the_demo_robot():
    from safemanip_ros.monitor.build import build_instances
    from safemanip_ros.resources import default_suites
    instances = build_instances([str(p) for p in default_suites()], robot_config=str(ROBOT)).instances
    shipped = (REPO / 'config' / 'foxglove' / 'safemanip.json').read_text()
    assert shipped == layout_text([i.instance for i in instances]), \
        'regenerate config/foxglove/safemanip.json with safemanip_ros.foxglove.layout.layout_text'
    doc = json.loads(shipped)
    # Every topic a panel reads is one the server advertises.
    read = {p['value'].split('.')[0] for p in doc['configById']['StateTransitions!verdicts']['paths']}
    read |= {p['value'].split('.')[0] for p in doc['configById']['Plot!gate']['paths']}
    read |= {c['topicPath'].split('.')[0] for c in doc['configById'].values() if 'topicPath' in c}
    read |= {c['topicToRender'] for c in doc['configById'].values() if 'topicToRender' in c}
    read |= set(doc['configById']['3D!safemanip']['topics'])
    assert read <= set(CHANNELS), read - set(CHANNELS)
    # Every panel placed is configured, and every configured panel placed.
    placed: set[str] = set()

    def walk(node):
        if isinstance(node, str):
            placed.add(node)
        else:
            walk(node['first'])
            walk(node['second'])
    walk(doc['layout'])
    assert placed == set(doc['configById'])


def test_a_state_path_quotes_the_instance():
    assert state_path('p[object="x"]') == '/safemanip/verdicts.instances[:]{instance=="p[object=\\"x\\"]"}.state'


def test_a_recording_converts_to_the_channels_foxglove_is_sent_live(tmp_path):
    """`safemanip bag foxglove`'s conversion, in process: a recording with a
    violation on the mug, a hold and TF at 100 Hz becomes the live server's
    channels: the violation lights the mug up until it closes, TF is each
    link's newest pose at 20 Hz of bag time, the hold is a state."""
    import numpy as np
    from mcap.reader import make_reader

    from safemanip_ros.bag import SplitBagWriter, typestore
    from safemanip_ros.foxglove.recording import recording_to_mcap
    from safemanip_ros.foxglove.view import StackView
    ts = typestore()
    T = lambda t: ts.types['builtin_interfaces/msg/Time'](sec=int(t), nanosec=int(round((t % 1) * 1e9)))  # noqa: E731
    H = lambda t: ts.types['std_msgs/msg/Header'](stamp=T(t), frame_id='')  # noqa: E731
    ty = ts.types
    w = SplitBagWriter(tmp_path / 'run', 'mcap')
    for topic, msgtype in (('/tf', 'tf2_msgs/msg/TFMessage'), ('/violations', 'safemanip_ros/msg/ViolationEvent'),
                           ('/supervisor_actions', 'safemanip_ros/msg/SupervisorAction')):
        w.add_topic(topic, msgtype)

    def transform(t: float, child: str, x: float):
        return ty['geometry_msgs/msg/TransformStamped'](
            header=ty['std_msgs/msg/Header'](stamp=T(t), frame_id='world'), child_frame_id=child,
            transform=ty['geometry_msgs/msg/Transform'](translation=ty['geometry_msgs/msg/Vector3'](x=x, y=0.0, z=0.8),
                                                        rotation=ty['geometry_msgs/msg/Quaternion'](x=0.0, y=0.0, z=0.0,
                                                                                                    w=1.0)))
    for k in range(300):                            # 3 s of TF at 100 Hz: the mug moves along x
        t = 10 + k * 0.01
        w.write('/tf', int(t * 1e9), ts.serialize_cdr(ty['tf2_msgs/msg/TFMessage'](
            transforms=[transform(t, 'mug_main', 0.001 * k), transform(t, 'gripper0_eef', 0.5)]),
            'tf2_msgs/msg/TFMessage'))

    def event(t: float, kind: int) -> bytes:
        kv = ty['diagnostic_msgs/msg/KeyValue'](key='object', value='mug')
        return ts.serialize_cdr(ty['safemanip_ros/msg/ViolationEvent'](
            header=H(t), event=kind, property='p', instance='p[object=mug]', binding=[kv], category='c', severity=2,
            episode_id='ep', start_frame=20, end_frame=20 if kind == 0 else 30, start_stamp=T(t), end_stamp=T(t),
            recovered=kind == 1, count=1), 'safemanip_ros/msg/ViolationEvent')

    def action(t: float, code: int) -> bytes:
        return ts.serialize_cdr(ty['safemanip_ros/msg/SupervisorAction'](
            header=H(t), action=code, property='p', instance='p[object=mug]', reason='r', frame=20, success=True),
            'safemanip_ros/msg/SupervisorAction')
    w.write('/violations', int(11.0e9), event(11.0, 0))
    w.write('/supervisor_actions', int(11.01e9), action(11.01, 2))
    w.write('/violations', int(11.5e9), event(11.5, 1))
    w.write('/supervisor_actions', int(12.0e9), action(12.0, 5))
    w.close()
    out = tmp_path / 'run.mcap'
    written = recording_to_mcap(tmp_path / 'run', out, StackView.of_robot(load_robot_config(ROBOT)))
    assert written['/safemanip/violations'] == 2 and written['/safemanip/supervisor'] == 2
    assert 55 <= written['/tf'] <= 62, written          # 3 s at 20 Hz, not 300 messages
    got: dict[str, list[tuple[int, dict]]] = {}
    with open(out, 'rb') as f:
        for _, channel, message in make_reader(f).iter_messages(log_time_order=True):
            got.setdefault(channel.topic, []).append((message.log_time, json.loads(message.data)))
    lit = [t for t, u in got['/safemanip/markers']
           if any(e['id'] == 'violation/mug' and not e['lifetime']['sec'] for e in u['entities'])]
    assert lit and min(lit) == int(11.0e9) and max(lit) < int(11.5e9), lit
    paler = [t for t, u in got['/safemanip/markers'] if any(e['id'] == 'violation/mug' for e in u['entities'])
             and t not in lit]
    assert paler == [int(11.5e9)], paler             # once, at the close: Foxglove removes it 2 s later
    assert [m['state'] for _, m in got['/safemanip/hold']] == ['pause', 'released']
    last = got['/tf'][-1][1]['transforms']
    mug = next(x for x in last if x['child_frame_id'] == 'mug_main')
    assert mug['translation']['x'] == pytest.approx(0.001 * 299, abs=0.006)    # the newest pose, not the first
    assert np.isclose(got['/tf'][1][0] - got['/tf'][0][0], 50_000_000, atol=10_000_000)
    # The robot drawn from TF with each batch: its gripper frame where TF puts it; the scene's objects in theirs.
    assert len(got['/safemanip/robot']) == written['/tf']
    entities = {e['id']: e for e in got['/safemanip/robot'][-1][1]['entities']}
    (ball,) = entities['robot/arm']['spheres']
    assert ball['pose']['position'] == {'x': 0.5, 'y': 0.0, 'z': 0.8} and not entities['robot/arm']['frame_locked']
    assert entities['scene/mug']['frame_id'] == 'mug_main' and entities['scene/mug']['frame_locked']


def _tr(child: str, parent: str, xyz, q=(0.0, 0.0, 0.0, 1.0)):
    from safemanip_ros.foxglove.scene import TransformRecord
    return TransformRecord(0, parent, child, tuple(xyz), tuple(q))


def test_the_arm_is_drawn_from_tf_whether_tf_is_a_chain_or_flat():
    """A robot without a URDF is drawn from TF: along its parent links
    where TF has them, else by the shortest bars joining its frames (a
    simulator's flat TF); poses composed through rotated parents."""
    import math

    from safemanip_ros.foxglove.robot import RobotFigure
    links = ['base', 'l1', 'l2', 'hand', 'finger_a', 'finger_b']
    # Flat TF, links listed out of order: the bars follow the arm, not the names.
    flat = [_tr('base', 'world', (0, 0, 0)), _tr('l1', 'world', (0, 0, 0.3)), _tr('l2', 'world', (0.3, 0, 0.35)),
            _tr('hand', 'world', (0.55, 0, 0.3)), _tr('finger_a', 'world', (0.6, 0.03, 0.3)),
            _tr('finger_b', 'world', (0.6, -0.03, 0.3)), _tr('cube', 'world', (0.6, 0, 0.02))]
    fig = RobotFigure('world', links, {'cube': 'cube'}, {'cube': (0.04, 0.04, 0.04)})
    bars = {frozenset(b) for b in fig.bars_between(flat)}
    assert bars == {frozenset(p) for p in [('base', 'l1'), ('l1', 'l2'), ('l2', 'hand'), ('hand', 'finger_a'),
                                           ('hand', 'finger_b')]}, bars
    # The arm moves: the same bars (not rewired), drawn where the frames now are.
    moved = [_tr('l2', 'world', (0.0, 0.3, 0.35)), _tr('hand', 'world', (0.0, 0.6, 0.35))]
    update = fig.update(moved, 5)
    arm = next(e for e in update['entities'] if e['id'] == 'robot/arm')
    assert {frozenset(b) for b in fig.bars_between([])} == bars
    assert {'x': 0.0, 'y': 0.6, 'z': 0.35} in [s['pose']['position'] for s in arm['spheres']]
    assert len(arm['lines'][0]['points']) == 2 * len(bars) and len(arm['spheres']) == len(links)
    cube = next(e for e in update['entities'] if e['id'] == 'scene/cube')
    assert cube['cubes'][0]['size'] == {'x': 0.04, 'y': 0.04, 'z': 0.04}
    # A TF chain: parent links are the bars, and a child of a parent turned 90 degrees about z is placed by it.
    q = (0.0, 0.0, math.sin(math.pi / 4), math.cos(math.pi / 4))
    chain = [_tr('base', 'world', (1, 0, 0), q), _tr('l1', 'base', (0.5, 0, 0)), _tr('hand', 'l1', (0, 0, 0.2)),
             _tr('elsewhere', 'map', (0, 0, 0))]
    fig = RobotFigure('world', ['base', 'l1', 'hand', 'elsewhere'], {}, {})
    assert sorted(fig.bars_between(chain)) == [('base', 'l1'), ('l1', 'hand')]   # 'elsewhere' never reaches the root
    at = {tuple(round(v, 9) for v in s['pose']['position'].values())
          for s in fig.update([], 0)['entities'][0]['spheres']}
    assert at == {(1.0, 0.0, 0.0), (1.0, 0.5, 0.0), (1.0, 0.5, 0.2)}
