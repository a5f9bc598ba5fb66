"""The stack in Foxglove, seen by a client no one here wrote: `safemanip run
--foxglove` beside a scripted robot, and Foxglove's own WebSocket client
library (@foxglove/ws-protocol on Node, test/helpers/foxglove_client.cjs)
subscribed to every channel the server advertises.  What it decodes is
compared with the monitor's and supervisor's own ROS topics (same events in
the same order, same verdicts, same actions); its service calls are refused
without the operator credential and acknowledge the hold with it; the MCAP
file written beside opens with the `mcap` library, schemas embedded."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, simulated_recording, wait_for
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from ros_helpers import ros_node

from safemanip_ros.msg import SupervisorAction, VerdictArray, ViolationEvent
from safemanip_ros.nodes.robot_standin import RobotStandIn

pytestmark = pytest.mark.ros
BIN = Path(sys.executable).parent
CLIENT_MODULES = BIN.parent / 'foxglove-client' / 'node_modules'
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
CREDENTIAL = 'correct horse battery staple'


class Client:
    """The Node client in its own process: its JSON lines as they come, and service calls."""

    def __init__(self, url: str) -> None:
        if not (CLIENT_MODULES / '@foxglove' / 'ws-protocol').is_dir():
            pytest.fail(f'the Foxglove client is not installed in {CLIENT_MODULES}: run make setup (needs node/npm)')
        self.proc = subprocess.Popen(['node', str(REPO / 'test' / 'helpers' / 'foxglove_client.cjs'), url],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, 'NODE_PATH': str(CLIENT_MODULES)})
        self.lines: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._calls = 0

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(json.loads(line))

    def of(self, kind: str) -> list[dict]:
        return [x for x in list(self.lines) if x['kind'] == kind]

    def messages(self, topic: str) -> list[dict]:
        return [x['data'] for x in self.of('message') if x['topic'] == topic]

    def send(self, service: str, request: dict, now: bool = False) -> int:
        """A service call sent: its id (:meth:`answer` once it came)."""
        self._calls += 1
        self.proc.stdin.write(json.dumps({'id': self._calls, 'call': service, 'request': request, 'now': now}) + '\n')
        self.proc.stdin.flush()
        return self._calls

    def answer(self, ident: int) -> dict | None:
        return next((r for r in self.of('response') if r['id'] == ident), None)

    def call(self, service: str, request: dict, wait=None, now: bool = False) -> dict:
        """Send a call and wait for its answer (``wait(cond)``: how to wait, e.g. while the robot publishes)."""
        ident = self.send(service, request, now)
        assert (wait or wait_for)(lambda: self.answer(ident) is not None), (service, self.lines[-5:])
        return self.answer(ident)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _stop(proc: subprocess.Popen, client: Client | None) -> None:
    """The client closed, then the stack stopped as Ctrl-C stops it."""
    if client is not None:
        client.close()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def _url(log: Path) -> str | None:
    m = re.search(r'Foxglove at (ws://[\d.]+:\d+)', log.read_text()) if log.exists() else None
    return m.group(1) if m else None


def _states_shown_agree(verdicts: list[VerdictArray], shown_msgs: list[dict]) -> list[tuple[int, str, str]]:
    """Each frame Foxglove showed carries, for every instance, the state the
    monitor last published for it (the monitor's VerdictArray lists what
    changed, and every instance now and then; Foxglove's message lists every
    instance every frame); the (frame, instance, state) shown."""
    published: dict[str, list[tuple[int, str]]] = {}
    for v in verdicts:
        for x in v.verdicts:
            published.setdefault(x.instance, []).append((v.frame, 'violated' if x.mode == 1 else (
                'false', 'true', 'presumably_false', 'presumably_true')[x.verdict]))
    shown = [(m['frame'], r['instance'], r['state']) for m in shown_msgs for r in m['instances']]
    wrong = []
    for frame, instance, state in shown:
        before = [st for f, st in published.get(instance, []) if f <= frame]
        if not before or before[-1] != state:
            wrong.append((frame, instance, state, before[-1:] or None))
    assert len(shown) >= 10 and not wrong, wrong[:5]
    return shown


@pytest.mark.slow
def test_foxglove_shows_what_the_monitor_publishes_and_the_operator_acts_through_it(tmp_path):
    cred = tmp_path / 'operator'
    cred.write_text(CREDENTIAL + '\n')
    os.chmod(cred, 0o600)
    log, mcap_file, bag = tmp_path / 'log', tmp_path / 'foxglove.mcap', tmp_path / 'bag'
    proc = subprocess.Popen([str(BIN / 'safemanip'), '--debug', 'run', '--config',
                             str(REPO / 'config' / 'robots' / 'panda_demo.yaml'), '--only', 'no_forbidden_contact',
                             '--controller-topic', 'arm/joint_trajectory', '--no-camera', '--bag', str(bag),
                             '--foxglove', '127.0.0.1:0', '--operator-credential', str(cred),
                             '--foxglove-mcap', str(mcap_file)],
                            stdout=open(log, 'w'), stderr=subprocess.STDOUT)
    client = None
    try:
        assert wait_for(lambda: _url(log) is not None or proc.poll() is not None, 120), log.read_text()[-3000:]
        client = Client(_url(log))
        with ros_node('foxglove_robot') as (node, ex):
            verdicts, events, actions = [], [], []
            node.create_subscription(VerdictArray, 'verdicts', verdicts.append, RELIABLE)
            node.create_subscription(ViolationEvent, 'violations', events.append, LATCHED)
            node.create_subscription(SupervisorAction, 'supervisor_actions', actions.append, LATCHED)
            robot = RobotStandIn(node, [0.1, -0.3, 0.0, -2.0, 0.0, 1.8, 0.7])

            def spin(cond, timeout_s=90.0):
                deadline = time.monotonic() + timeout_s
                while time.monotonic() < deadline:
                    robot.publish()
                    ex.spin_once(timeout_sec=0.05)
                    if cond():
                        return True
                return False

            def fox_verdicts() -> list[dict]:
                return client.messages('/safemanip/verdicts')
            assert spin(lambda: client.of('services') and fox_verdicts() and verdicts), \
                (client.lines[-5:], log.read_text()[-3000:])
            (channels,) = client.of('channels')
            assert set(channels['topics']) >= {'/safemanip/verdicts', '/safemanip/violations', '/safemanip/supervisor',
                                               '/safemanip/hold', '/safemanip/gate', '/safemanip/log',
                                               '/safemanip/markers', '/tf', '/diagnostics'}
            assert channels['schemas']['/safemanip/markers']['schemaName'] == 'foxglove.SceneUpdate'
            assert set(client.of('services')[0]['names']) == {
                '/safemanip/login', '/safemanip/acknowledge', '/safemanip/resume', '/safemanip/start_episode',
                '/safemanip/end_episode'}
            # Without the credential nothing is done; a wrong one is refused.
            refused = client.call('/safemanip/acknowledge', {}, spin)
            assert not refused['ok'] and 'log in first' in refused['error'], refused
            wrong = client.call('/safemanip/login', {'credential': 'guess'}, spin)
            assert not wrong['ok'] and 'not the operator credential' in wrong['error'], wrong
            robot.touch()
            assert spin(lambda: any(a.action == SupervisorAction.ACTION_PAUSE for a in actions)
                        and any(m['held'] for m in client.messages('/safemanip/hold'))), log.read_text()[-3000:]
            ok = client.call('/safemanip/login', {'credential': CREDENTIAL}, spin)
            assert ok['ok'] and ok['data']['success'], ok
            early = client.call('/safemanip/acknowledge', {}, spin)
            assert early['ok'] and not early['data']['success'] and 'not resuming' in early['data']['message'], early
            robot.touch(None)
            resumed = client.call('/safemanip/resume', {'wait_s': 60}, spin)
            assert resumed['ok'] and resumed['data']['success'], resumed
            assert spin(lambda: any(a.action == SupervisorAction.ACTION_RESUME for a in actions)
                        and len(client.messages('/safemanip/supervisor')) >= len(actions)
                        and len(client.messages('/safemanip/violations')) >= len(events) >= 2)
            # The hold lit the gripper in the 3D scene, and its release took the marker away.
            updates = client.messages('/safemanip/markers')
            lit = [k for k, u in enumerate(updates) if any(e['id'] == 'hold/gripper' for e in u['entities'])]
            assert lit and any('hold/gripper' in {d['id'] for d in u['deletions']} for u in updates[lit[0]:]), updates
            assert updates[lit[0]]['entities'][-1]['frame_id'] == 'gripper0_eef'
            # The same events, in the same order; the same actions.
            fox_events = [(e['instance'], e['event'], e['start_frame'], e['end_frame'])
                          for e in client.messages('/safemanip/violations')]
            ros_events = [(e.instance, ('opened', 'closed', 'pending_at_end')[e.event], e.start_frame, e.end_frame)
                          for e in events]
            assert fox_events == ros_events and ros_events, (fox_events, ros_events)
            fox_actions = [(a['action'], a['instance'], a['reason']) for a in client.messages('/safemanip/supervisor')]
            ros_actions = [(('log', 'alert', 'pause', 'retract', 'stop', 'resume')[a.action], a.instance, a.reason)
                           for a in actions]
            assert fox_actions == ros_actions, (fox_actions, ros_actions)
            shown = _states_shown_agree(verdicts, fox_verdicts())
            assert {'violated', 'presumably_true'} <= {state for _, _, state in shown}
            assert client.messages('/tf')[0]['transforms'][0]['parent_frame_id']
            live_verdicts, live_events = fox_verdicts(), client.messages('/safemanip/violations')
            robot.destroy()
    finally:
        _stop(proc, client)
    assert proc.returncode == 0, log.read_text()[-3000:]
    # The MCAP file Foxglove would open: our channels, their JSON schemas embedded.
    from mcap.reader import make_reader
    with open(mcap_file, 'rb') as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        schemas = {summary.channels[c].topic: summary.schemas[summary.channels[c].schema_id]
                   for c in summary.channels}
        counts = {summary.channels[c].topic: n for c, n in summary.statistics.channel_message_counts.items()}
    assert schemas['/safemanip/verdicts'].encoding == 'jsonschema' and schemas['/safemanip/verdicts'].data
    # Everything logged is in the file, from before the client subscribed: at least what the client decoded.
    assert counts.get('/safemanip/verdicts', 0) >= len(live_verdicts) and \
        counts.get('/safemanip/violations', 0) >= len(live_events) >= 2, (counts, len(live_verdicts), len(live_events))
    # The recording, converted (`safemanip bag foxglove`), shows what Foxglove was shown live: the same verdict
    # states frame by frame and the same events, through the same view.
    converted = tmp_path / 'recording.mcap'
    done = subprocess.run([str(BIN / 'safemanip'), 'bag', 'foxglove', str(bag), '--out', str(converted), '--config',
                           str(REPO / 'config' / 'robots' / 'panda_demo.yaml')], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and '/safemanip/verdicts' in done.stdout, done.stdout + done.stderr
    from mcap.reader import make_reader as reader_of
    offline: dict[str, list[dict]] = {}
    with open(converted, 'rb') as f:
        for _, channel, message in reader_of(f).iter_messages():
            offline.setdefault(channel.topic, []).append(json.loads(message.data))
    live_states = {(m['frame'], r['instance']): r['state'] for m in live_verdicts for r in m['instances']}
    offline_states = {(m['frame'], r['instance']): r['state'] for m in offline['/safemanip/verdicts']
                      for r in m['instances']}
    common = set(live_states) & set(offline_states)
    assert len(common) >= 10 and all(live_states[k] == offline_states[k] for k in common)
    assert [(e['instance'], e['event']) for e in offline['/safemanip/violations']] == \
        [(e['instance'], e['event']) for e in live_events]
    assert any(e['id'] == 'hold/gripper' for u in offline['/safemanip/markers'] for e in u['entities'])
    assert '/tf' not in offline          # the stack's recording holds no raw inputs unless asked (record_raw_inputs)
    # The recording's MCAP carries our message definitions too: Foxglove decodes it without a ROS install.
    ours = {}
    for split in sorted(bag.glob('*.mcap')):
        with open(split, 'rb') as f:
            summary = make_reader(f).get_summary()
        ours.update({s.name: s for s in summary.schemas.values() if s.name.startswith('safemanip_ros/')})
    assert 'safemanip_ros/msg/ViolationEvent' in ours and all(s.encoding == 'ros2msg' and s.data for s in ours.values())


@pytest.mark.slow
def test_without_a_credential_foxglove_is_read_only_and_bad_options_are_one_line(tmp_path):
    cred = tmp_path / 'operator'
    cred.write_text(CREDENTIAL + '\n')
    os.chmod(cred, 0o600)
    secured = {**os.environ, 'ROS_SECURITY_ENABLE': 'true'}
    for args, words, env in [(['--foxglove', 'ws://x'], 'expected [HOST:]PORT', None),
                             (['--operator-credential', str(tmp_path)], 'give --foxglove [HOST:]PORT too', None),
                             (['--foxglove', '0', '--operator-credential', str(tmp_path / 'none')], 'cannot read', None),
                             # Under SROS2 the stack's enclave may not act for the operator: said before it starts.
                             (['--foxglove', '0', '--operator-credential', str(cred)], '--enclave /safemanip/operator',
                              secured)]:
        done = subprocess.run([str(BIN / 'safemanip'), 'run', '--config',
                               str(REPO / 'config' / 'robots' / 'panda_demo.yaml'), '--no-record', *args],
                              capture_output=True, text=True, timeout=120, env=env)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and words in lines[0], (args, done.stderr[-2000:])
    log = tmp_path / 'log'
    proc = subprocess.Popen([str(BIN / 'safemanip'), 'run', '--config', str(REPO / 'config' / 'robots' /
                             'panda_demo.yaml'), '--no-record', '--no-camera', '--foxglove', '127.0.0.1:0'],
                            stdout=open(log, 'w'), stderr=subprocess.STDOUT)
    client = None
    try:
        assert wait_for(lambda: _url(log) is not None or proc.poll() is not None, 120), log.read_text()[-3000:]
        client = Client(_url(log))
        assert wait_for(lambda: client.of('channels'), 60), client.lines
        answer = client.call('/safemanip/acknowledge', {}, now=True)
        assert not answer['ok'] and 'no service' in answer['error'] and not client.of('services')
    finally:
        _stop(proc, client)
    assert proc.returncode == 0, log.read_text()[-3000:]


@pytest.mark.slow
def test_a_live_gate_shows_each_robots_decision_and_evidence_in_foxglove(tmp_path):
    """``gate --live --foxglove``: the gate's decisions per robot and limit
    reach Foxglove as they are published (a Plot of the observed rate
    against the limit in the shipped layout)."""
    from test_gate_live import Fleet, _gate, fail_r2
    fleet = Fleet()
    gate = _gate(tmp_path, '--foxglove', '127.0.0.1:0')
    log = tmp_path / 'gate.log'
    client = None
    try:
        url = re.compile(r'Foxglove: (ws://[\d.]+:\d+)')
        assert wait_for(lambda: url.search(log.read_text()) or gate.poll() is not None, 120), log.read_text()
        client = Client(url.search(log.read_text()).group(1))
        assert wait_for(lambda: client.of('channels'), 60)
        fail_r2(fleet, gate)
        assert fleet.spin_until(lambda: fleet.decisions.get(('r2', 'p')) is not None
                                and fleet.decisions[('r2', 'p')].decision == 2, 30)
        shown = client.messages('/safemanip/gate')
        assert {(m['robot'], m['name']) for m in shown} >= {('r1', 'p'), ('r2', 'p')}, shown[-3:]   # '': pooled
        r2 = [m for m in shown if m['robot'] == 'r2']
        assert r2[-1]['decision'] == 'fail' and r2[-1]['rate'] == pytest.approx(0.4) and r2[-1]['limit'] == 0.05
        assert r2[-1]['rollouts'] == fleet.decisions[('r2', 'p')].rollouts
    finally:
        if client is not None:
            client.close()
        gate.kill()
        fleet.close()


@pytest.fixture(scope='module')
def dropped_cube(tmp_path_factory) -> Path:
    """A recording a robot's own stack would have made (raw inputs and /clock): a simulated Lift rollout whose
    policy drops the cube mid-air."""
    return simulated_recording(tmp_path_factory.mktemp('replay'), 'midair_drop', 5)


@pytest.mark.slow
def test_a_replayed_recording_shows_the_robot_and_lights_up_the_dropped_cube(tmp_path, dropped_cube):
    """The issue's journey over a replayed bag: `safemanip run --foxglove` on
    the player's /clock beside `bag_player`; the client sees the arm drawn
    where TF puts it, the cube lit while its violation is open, and the same
    events and verdicts as the monitor's own topics."""
    config = REPO / 'config' / 'robots' / 'robosuite_lift.yaml'
    log, player_log = tmp_path / 'log', tmp_path / 'player.log'
    proc = subprocess.Popen([str(BIN / 'safemanip'), 'run', '--config', str(config), '--no-supervisor', '--no-record',
                             '--no-camera', '--foxglove', '127.0.0.1:0', '--ros-args', '-p', 'use_sim_time:=true'],
                            stdout=open(log, 'w'), stderr=subprocess.STDOUT)
    client = player = None
    try:
        assert wait_for(lambda: _url(log) is not None or proc.poll() is not None, 120), log.read_text()[-3000:]
        client = Client(_url(log))
        with ros_node('foxglove_replay_watcher') as (node, ex):
            verdicts, events = [], []
            node.create_subscription(VerdictArray, 'verdicts', verdicts.append, RELIABLE)
            node.create_subscription(ViolationEvent, 'violations', events.append, LATCHED)

            def spin(cond, timeout_s=180.0):
                deadline = time.monotonic() + timeout_s
                while time.monotonic() < deadline:
                    ex.spin_once(timeout_sec=0.05)
                    if cond():
                        return True
                return False
            # The replay starts once this node and the client both hear the monitor from its first frame.
            assert spin(lambda: client.of('channels') and 'nodes up' in log.read_text()
                        and node.count_publishers('verdicts') and node.count_publishers('violations')), \
                log.read_text()[-3000:]
            player = subprocess.Popen([str(BIN / 'bag_player'), '--ros-args', '-p', f'bag:={dropped_cube}',
                                       '-p', 'clock:=true', '-p', 'wait_for_subscribers:=1'],
                                      stdout=open(player_log, 'w'), stderr=subprocess.STDOUT)
            assert spin(lambda: player.poll() is not None), player_log.read_text()[-3000:]
            assert player.returncode == 0, player_log.read_text()[-3000:]
            opened = [e for e in events if e.event == ViolationEvent.EVENT_OPENED]
            assert opened, log.read_text()[-3000:]
            assert spin(lambda: len(client.messages('/safemanip/violations')) >= len(events)
                        and client.messages('/safemanip/verdicts')
                        and client.messages('/safemanip/verdicts')[-1]['frame'] >= verdicts[-1].frame, 60)
            fox_events = [(e['instance'], e['event'], e['start_frame']) for e in client.messages('/safemanip/violations')]
            ros_events = [(e.instance, ('opened', 'closed', 'pending_at_end')[e.event], e.start_frame) for e in events]
            assert fox_events == ros_events, (fox_events, ros_events)
            _states_shown_agree(verdicts, client.messages('/safemanip/verdicts'))
            # The cube's red box (the drop's violation opens and closes in one frame: it stays, paler, for 2 s).
            cube = [u for u in client.messages('/safemanip/markers')
                    if any(e['id'] == 'violation/cube' and e['frame_id'] == 'cube_main' for e in u['entities'])]
            assert any(kv.value == 'cube' for e in opened for kv in e.binding), [e.instance for e in opened]
            assert cube, client.messages('/safemanip/markers')[-3:]
            # The arm: a ball on each robot frame TF places, where TF places it; the cube and table as boxes.
            last = {e['id']: e for e in client.messages('/safemanip/robot')[-1]['entities']}
            assert {'robot/arm', 'scene/cube', 'scene/table'} <= set(last), sorted(last)
            balls = [s['pose']['position'] for s in last['robot/arm']['spheres']]
            assert len(balls) >= 10 and len(last['robot/arm']['lines'][0]['points']) == 2 * (len(balls) - 1)
            tf = {}
            for m in client.messages('/tf'):
                for t in m['transforms']:
                    tf[t['child_frame_id']] = t['translation']
            eef = tf['gripper0_right_eef']
            assert any(all(abs(b[k] - eef[k]) < 0.05 for k in 'xyz') for b in balls), (eef, balls)
    finally:
        if player is not None and player.poll() is None:
            player.kill()
        _stop(proc, client)
    assert proc.returncode == 0, log.read_text()[-3000:]


@pytest.mark.slow
def test_an_audit_writes_what_it_found_for_foxglove_on_the_robot_as_it_moved(tmp_path, dropped_cube):
    """``safemanip audit --foxglove-mcap DIR``: for each source with a
    violation, an MCAP file of the audit's own verdicts and events (those of
    report.json, frame by frame) through the live server's view, merged with
    the recording's TF: the arm drawn, the cube lit; a clean source writes none."""
    from mcap.reader import make_reader
    clean = tmp_path / 'clean'
    clean.mkdir()
    (clean / 'ok.jsonl').write_text('{"task_done": true}\n')
    out, fox = tmp_path / 'audit', tmp_path / 'fox'
    done = subprocess.run([str(BIN / 'safemanip'), 'audit', str(dropped_cube), str(clean / 'ok.jsonl'), '--config',
                           str(REPO / 'config' / 'robots' / 'robosuite_lift.yaml'), '--allow-unknown-predicates',
                           '--out', str(out), '--foxglove-mcap', str(fox), '--quiet'],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and 'foxglove: 1 MCAP files written' in done.stdout, done.stdout + done.stderr
    (written,) = fox.glob('*.mcap')
    assert written.name.startswith(dropped_cube.name)
    got: dict[str, list[dict]] = {}
    with open(written, 'rb') as f:
        for _, channel, message in make_reader(f).iter_messages(log_time_order=True):
            got.setdefault(channel.topic, []).append(json.loads(message.data))
    report = json.loads((out / 'report.json').read_text())
    (rollout,) = [e for e in report['episodes'] if e['episode'] == dropped_cube.name]
    # The events are the report's violation episodes, in frame order.
    expected = sorted([(x['start'], 'opened', i['instance']) for i in rollout['timeline'] for x in i['episodes']]
                      + [(x['end'], 'closed' if x['recovered'] else 'pending_at_end', i['instance'])
                         for i in rollout['timeline'] for x in i['episodes']], key=lambda e: (e[0], e[1] != 'opened'))
    shown = [(e['start_frame'] if e['event'] == 'opened' else e['end_frame'], e['event'], e['instance'])
             for e in got['/safemanip/violations']]
    assert shown == expected and expected, (shown, expected)
    # Every frame's verdict of each violated instance is the report's (its verdict timeline's runs).
    assert len(got['/safemanip/verdicts']) == rollout['frames']
    words = ('false', 'true', 'presumably_false', 'presumably_true')
    for instance, runs in rollout['verdict_timeline'].items():
        for start, end, code in runs:
            for frame in (start, end):
                row = next(r for r in got['/safemanip/verdicts'][frame]['instances'] if r['instance'] == instance)
                assert row['verdict'] == words[code], (instance, frame, row, code)
    # The 3D view: the cube lit by the violation naming it, the arm drawn from the recording's TF.
    assert any(e['id'] == 'violation/cube' for u in got['/safemanip/markers'] for e in u['entities'])
    arm = [e for u in got['/safemanip/robot'] for e in u['entities'] if e['id'] == 'robot/arm']
    assert arm and len(arm[-1]['spheres']) >= 10 and got['/tf']
    # A re-run leaves the file as it is.
    stamp = written.stat().st_mtime_ns
    again = subprocess.run(done.args, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and written.stat().st_mtime_ns == stamp, again.stdout + again.stderr
