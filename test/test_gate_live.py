"""``safemanip gate --live`` over real DDS: a fleet of two namespaced
monitors (stood in for by a node publishing their final MonitorMetrics),
per-robot and pooled decisions, exit codes, a restart that continues from
the persisted state, and decisions equal to ``gate --sequential``'s replay
of the same rollouts."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import rclpy
from conftest import wait_for
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor

from safemanip_ros.audit.sequential import FAIL, PASS, CanaryGate, SequentialTest, replay
from safemanip_ros.msg import GateDecision, MonitorMetrics, PropertyMetrics
from safemanip_ros.nodes.qos import FINAL_METRICS, latched

BIN = [sys.executable, '-m', 'safemanip_ros.cli.main']


class Fleet:
    """Stands in for the monitors of robots ``r1`` and ``r2`` and listens to the gate's decisions."""

    def __init__(self) -> None:
        self.ctx = Context()
        rclpy.init(context=self.ctx)
        self.node = rclpy.create_node('fleet_stand_in', context=self.ctx)
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self.pubs = {r: self.node.create_publisher(MonitorMetrics, f'/{r}/metrics/final', FINAL_METRICS)
                     for r in ('r1', 'r2')}
        self.decisions: dict[tuple[str, str], GateDecision] = {}
        self.node.create_subscription(GateDecision, 'gate/decisions',
                                      lambda m: self.decisions.__setitem__((m.robot, m.name), m), latched(256))

    def spin_until(self, cond, timeout_s: float = 60.0) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if cond():
                return True
            self.ex.spin_once(timeout_sec=0.05)
        return cond()

    def rollout(self, robot: str, rollout: str, triggers: int, violations: int) -> None:
        msg = MonitorMetrics(episode_id=rollout, final=True, frames=100, properties=[
            PropertyMetrics(property='p', instance='p[cube]', category='c', triggers=triggers, violations=violations)])
        self.pubs[robot].publish(msg)

    def close(self) -> None:
        self.node.destroy_node()
        rclpy.shutdown(context=self.ctx)


@pytest.fixture()
def fleet():
    f = Fleet()
    yield f
    f.close()


def _gate(tmp_path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([*BIN, 'gate', '--live', '--robot', 'r1', '--robot', 'r2', '--max-rate', 'p=0.05',
                             '--state', str(tmp_path / 'state.json'), *extra],
                            stdout=open(tmp_path / 'gate.log', 'a'), stderr=subprocess.STDOUT, text=True)


def _matched(fleet: Fleet) -> bool:
    return all(p.get_subscription_count() > 0 for p in fleet.pubs.values())


@pytest.mark.slow
def test_a_clean_fleet_passes_as_early_as_the_evidence_allows(fleet, tmp_path):
    gate = _gate(tmp_path)
    try:
        assert fleet.spin_until(lambda: _matched(fleet)), (tmp_path / 'gate.log').read_text()
        sent = 0
        while gate.poll() is None and sent < 40:
            fleet.rollout('r1' if sent % 2 == 0 else 'r2', f'ep{sent}', 5, 0)
            sent += 1
            fleet.spin_until(lambda: ('', 'p') in fleet.decisions and fleet.decisions[('', 'p')].rollouts >= sent, 10)
        assert gate.wait(timeout=30) == 0, (tmp_path / 'gate.log').read_text()
    finally:
        gate.kill()
    # The gate exits once its final decisions are acknowledged: taken here even if this executor had not yet.
    assert fleet.spin_until(lambda: fleet.decisions[('', 'p')].decision == GateDecision.PASS, 10)
    pooled = fleet.decisions[('', 'p')]
    # Pooled 5 triggers a rollout, no violation: the replay of the same rollouts decides at the same point.
    expected = replay(SequentialTest(0.05, 0.05), [(5, 0)] * 40)
    assert pooled.decision == GateDecision.PASS and pooled.decided_after == expected.after == 75
    assert pooled.rollouts == expected.batches == 15
    state = json.loads((tmp_path / 'state.json').read_text())
    assert CanaryGate.from_json(state).outcome() == PASS


def fail_r2(fleet: Fleet, gate: subprocess.Popen) -> None:
    """Rollouts until the gate ends: r1 clean, r2 violating 2 of its 5 triggers each time; the gate exits 1 (FAIL)."""
    assert fleet.spin_until(lambda: _matched(fleet))
    for i in range(30):
        if gate.poll() is not None:
            break
        fleet.rollout('r1', f'a{i}', 5, 0)
        fleet.rollout('r2', f'b{i}', 5, 2)
        fleet.spin_until(lambda: ('r2', 'p') in fleet.decisions and fleet.decisions[('r2', 'p')].rollouts > i, 10)
    assert gate.wait(timeout=30) == 1


@pytest.mark.slow
def test_a_failing_robot_fails_the_gate_and_is_named(fleet, tmp_path):
    (tmp_path / 'alerts.yaml').write_text(f'alerts:\n  jsonl: {tmp_path / "alerts.jsonl"}\n')
    gate = _gate(tmp_path, '--alerts', str(tmp_path / 'alerts.yaml'))
    try:
        fail_r2(fleet, gate)
    finally:
        gate.kill()
    log = (tmp_path / 'gate.log').read_text()
    assert 'FAIL' in log and 'p (r2)' in log
    # Latched: on a loaded machine the last decisions may still be on their way when the gate has exited.
    assert fleet.spin_until(lambda: ('r1', 'p') in fleet.decisions and
                            fleet.decisions.get(('r2', 'p')) is not None and
                            fleet.decisions[('r2', 'p')].decision == GateDecision.FAIL, 30), fleet.decisions
    assert fleet.decisions[('r1', 'p')].decision != GateDecision.FAIL
    # The decision reached the alert sink.
    alerts = [json.loads(line) for line in (tmp_path / 'alerts.jsonl').read_text().splitlines()]
    assert {'type': 'gate', 'name': 'p', 'robot': 'r2', 'decision': FAIL}.items() <= alerts[0].items()


@pytest.mark.slow
def test_a_restarted_gate_continues_from_its_state(fleet, tmp_path):
    first = _gate(tmp_path, '--max-rollouts', '6')
    try:
        assert fleet.spin_until(lambda: _matched(fleet))
        for i in range(6):
            fleet.rollout('r1', f'ep{i}', 5, 0)
            fleet.spin_until(lambda: ('', 'p') in fleet.decisions and fleet.decisions[('', 'p')].rollouts > i, 10)
        assert first.wait(timeout=30) == 4          # budget spent, undecided (30 triggers)
    finally:
        first.kill()
    fleet.decisions.clear()
    second = _gate(tmp_path)
    try:
        assert fleet.spin_until(lambda: _matched(fleet))
        fleet.rollout('r1', 'ep5', 5, 0)            # already counted: ignored
        for i in range(6, 30):
            if second.poll() is not None:
                break
            fleet.rollout('r1', f'ep{i}', 5, 0)
            fleet.spin_until(lambda: ('', 'p') in fleet.decisions and fleet.decisions[('', 'p')].rollouts > i, 10)
        assert second.wait(timeout=30) == 0
    finally:
        second.kill()
    assert fleet.spin_until(lambda: fleet.decisions[('', 'p')].decision == GateDecision.PASS, 10)
    assert fleet.decisions[('', 'p')].decided_after == 75 and fleet.decisions[('', 'p')].rollouts == 15
    assert 'continuing from' in (tmp_path / 'gate.log').read_text()


def test_the_canary_core_matches_the_replay():
    gate = CanaryGate({'p': 0.05, 'c': 0.2}, 'trigger', 0.05)
    for i in range(60):
        gate.add_rollout('r1' if i % 3 else 'r2', f'e{i}', [('p', 'c', 4, int(i % 7 == 0)), ('q', 'c', 2, 0)])
    assert not gate.add_rollout('r2', 'e0', [('p', 'c', 4, 4)])            # counted once
    batches = [(4, int(i % 7 == 0)) for i in range(60)]
    expected = replay(SequentialTest(0.05, 0.025), batches)
    s = gate.stream('', 'p')
    assert (s.decision, s.decided_after) == (expected.decision, expected.after)
    assert gate.stream('', 'c').observations == 6 * 60
    again = CanaryGate.from_json(json.loads(json.dumps(gate.to_json())))
    assert again.to_json() == gate.to_json() and again.outcome() == gate.outcome()
    assert gate.outcome() in (PASS, FAIL, None)
    single = CanaryGate({'p': 0.05}, 'rollout', 0.05)       # one robot on the monitor's own topics (robot '')
    for i in range(10):
        single.add_rollout('', f'e{i}', [('p', 'c', 1, 0)])
    assert single.stream('', 'p').observations == 10 and single.robots() == []


@pytest.mark.slow
def test_bad_live_options_exit_2(tmp_path):
    for extra, words in ((['--max-rate', 'p=2'], 'strictly between 0 and 1'), ([], 'at least one --max-rate'),
                                         (['--max-rate', 'p=0.1', '--alpha', '1.5'], '--alpha'),
                         (['--max-rate', 'p=0.1', '--max-duration-s', '1e300'], '--max-duration-s 1e+300')):
        proc = subprocess.run([*BIN, 'gate', '--live', *extra], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and words in proc.stderr, (extra, proc.stderr)


@pytest.mark.parametrize('text, words', [
    ('alert:\n  jsonl: a.jsonl\n', "alerts.yaml:1: unknown field 'alert' (allowed: alerts, category"),
    ('alerts: 5\n', 'alerts.yaml:1: alerts: expected a mapping, got int 5'),
    ('- 1\n', 'alerts.yaml:1: expected a mapping, got a list [1]'),
    ('alerts:\n  queue: x\n', "alerts.yaml:2: alerts.queue: expected an integer, got str 'x'"),
])
@pytest.mark.slow
def test_an_alerts_file_that_would_send_nothing_is_refused(tmp_path, text, words):
    """A misspelt `alerts:` used to run the gate with no sink at all; `alerts: 5` was exit 70."""
    (tmp_path / 'alerts.yaml').write_text(text)
    proc = subprocess.run([*BIN, 'gate', '--live', '--max-rate', 'p=0.1', '--max-duration-s', '1', '--alerts',
                           str(tmp_path / 'alerts.yaml')], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr
    assert 'Traceback' not in proc.stderr


@pytest.mark.slow
def test_the_time_budget_ends_a_gate_that_hears_no_rollout(tmp_path):
    """No monitor publishes: the gate still stops undecided (exit 4) when its time is spent (it waited for a
    rollout to look at the clock, and so ran on for good)."""
    proc = _gate(tmp_path, '--max-duration-s', '1')
    try:
        assert proc.wait(timeout=60) == 4, (tmp_path / 'gate.log').read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert 'UNDECIDED (budget spent)' in (tmp_path / 'gate.log').read_text()


@pytest.mark.slow
def test_a_gate_rebuilt_from_a_recorded_bag_decides_as_the_replay(tmp_path):
    """The final metrics a recorder kept (two robots' namespaced topics)
    are counted in stamp order before anything live: the same decision,
    at the same rollout, as the replay of those rollouts."""
    from safemanip_ros.audit.sequential import rollouts_from_bags
    from safemanip_ros.bag import SplitBagWriter, typestore
    ts = typestore()
    T, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    MM, PM = ts.types['safemanip_ros/msg/MonitorMetrics'], ts.types['safemanip_ros/msg/PropertyMetrics']
    w = SplitBagWriter(tmp_path / 'bag', 'mcap', split_s=100.0)
    for robot in ('r1', 'r2'):
        w.add_topic(f'/{robot}/metrics', 'safemanip_ros/msg/MonitorMetrics')
    for i in range(24):
        robot = ('r1', 'r2')[i % 2]
        ns = 10**9 * (i + 1)
        msg = MM(header=Header(stamp=T(sec=i + 1, nanosec=0), frame_id=''), episode_id=f'ep{i}', frames=100,
                 final=i % 3 != 2, properties=[PM(property='p', instance='p[x]', category='c', triggers=5,
                                                  violations=0, unsafe_frames=0, frames=100, pending=0,
                                                  unknown_frames=0)])
        w.write(f'/{robot}/metrics', ns, ts.serialize_cdr(msg, 'safemanip_ros/msg/MonitorMetrics'))
    w.close()
    recorded = rollouts_from_bags([str(tmp_path / 'bag')])
    assert len(recorded) == 16 and {r[1] for r in recorded} == {'r1', 'r2'}      # finals only
    proc = subprocess.run([*BIN, 'gate', '--live', '--robot', 'r1', '--robot', 'r2', '--max-rate', 'p=0.05',
                           '--rebuild-from', str(tmp_path / 'bag'), '--state', str(tmp_path / 'state.json')],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr           # decided from the recording alone
    state = CanaryGate.from_json(json.loads((tmp_path / 'state.json').read_text()))
    expected = replay(SequentialTest(0.05, 0.05), [(5, 0)] * 16)
    assert expected.decision == PASS and expected.batches == 15
    assert 'counted 16 recorded rollouts' in proc.stderr + proc.stdout
    assert state.stream('', 'p').decided_after == expected.after and state.outcome() == PASS


def _state(limits=None, streams=None, seen=None) -> dict:
    return {'limits': limits or {'p': 0.05}, 'unit': 'trigger', 'alpha': 0.05,
            'seen': seen if seen is not None else [], 'streams': streams if streams is not None else []}


def _row(robot='', name='p', n=0, k=0, rollouts=0, decision=None, after=None) -> dict:
    return {'robot': robot, 'name': name, 'observations': n, 'violations': k, 'rollouts': rollouts,
            'decision': decision, 'decided_after': after}


@pytest.mark.parametrize('doc, words', [
    (_state(streams=[_row(decision='PASS', after=None)]), 'decided_after: None does not go with decision'),
    (_state(streams=[_row(decision='PASS', after=1, n=1, rollouts=1)], seen=[['', 'e']]),
     'PASS after 1 observations is not what its test decides'),
    (_state(streams=[_row(name='q', decision='FAIL', after=1, n=1, k=1, rollouts=1)]), "a stream for 'q', which is no limit"),
    (_state(streams=[_row(n=3, k=9, rollouts=1)], seen=[['', 'e']]), '9 violations in 3 observations'),
    (_state(streams=[_row(n=-1)]), 'observations: expected a count'),
    (_state(streams=[_row(n=2**64, rollouts=1)]), 'observations: expected a count'),
    (_state(streams=[_row(n='5')]), 'observations: expected a count'),
    (_state(streams=[_row(n=5, rollouts=3)], seen=[['', 'e']]), '3 rollouts counted'),
    (_state(streams=[_row(robot='r1', n=5, rollouts=1), _row(n=9, rollouts=1)], seen=[['r1', 'e']]),
     "the robots' observations for 'p' add up to 5, the pooled stream says 9"),
    (_state(streams=[_row(decision='maybe', after=1, n=1, rollouts=1)], seen=[['', 'e']]), 'decision: expected null'),
    ({'limits': {'p': 0.05}}, 'alpha: expected a number'), ([1, 2], 'expected a JSON object'),
    (_state(streams=[{'robot': ''}]), 'streams[0]: expected the fields'),
])
@pytest.mark.slow
def test_a_state_file_is_checked_before_it_is_trusted(tmp_path, doc, words):
    """A PASS with no observation used to pass (exit 0), a FAIL for a limit nobody asked for to fail,
    and a count past 64 bits to abort the process in the message code (exit 134)."""
    (tmp_path / 'state.json').write_text(json.dumps(doc))
    proc = subprocess.run([*BIN, 'gate', '--live', '--max-rate', 'p=0.05', '--max-duration-s', '1', '--state',
                           str(tmp_path / 'state.json')], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert 'not a gate state' in proc.stderr and words in proc.stderr, proc.stderr
    assert 'Traceback' not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.slow
def test_two_gates_on_one_state_file_are_refused(tmp_path):
    first = _gate(tmp_path, '--max-duration-s', '60')
    try:
        assert wait_for(lambda: (tmp_path / 'state.json').exists(), 60)
        second = subprocess.run([*BIN, 'gate', '--live', '--max-rate', 'p=0.05', '--state', str(tmp_path / 'state.json'),
                                 '--robot', 'r1', '--robot', 'r2'], capture_output=True, text=True, timeout=120)
        assert second.returncode == 2 and f'{tmp_path / "state.json"} is in use by another gate (pid {first.pid})' \
            in second.stderr, second.stderr
    finally:
        first.terminate()
        first.wait(timeout=30)
    # Once the first has ended, the file is free again.
    again = subprocess.run([*BIN, 'gate', '--live', '--max-rate', 'p=0.05', '--state', str(tmp_path / 'state.json'),
                            '--robot', 'r1', '--robot', 'r2', '--max-duration-s', '0.5'],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 4, again.stderr


@pytest.mark.slow
def test_a_limit_that_matches_nothing_ends_with_the_budget_and_says_so(fleet, tmp_path):
    """`--max-rate typo=0.05` waited forever: the budget counted only rollouts that carried the name."""
    proc = subprocess.Popen([*BIN, 'gate', '--live', '--robot', 'r1', '--robot', 'r2', '--max-rate', 'typo=0.05',
                             '--max-rollouts', '3'], stdout=open(tmp_path / 'gate.log', 'w'), stderr=subprocess.STDOUT)
    try:
        assert fleet.spin_until(lambda: _matched(fleet))
        for i in range(10):
            if proc.poll() is not None:
                break
            fleet.rollout('r1', f'ep{i}', 5, 0)
            fleet.spin_until(lambda: proc.poll() is not None, 2)
        assert proc.wait(timeout=30) == 4
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / 'gate.log').read_text()
    assert "limit 'typo' matches no property or category of the rollouts so far (they report: c, p)" in log, log
    assert 'typo matched no property or category in 3 rollout(s); they report: c, p' in log, log


@pytest.mark.slow
def test_a_decision_reached_on_the_recording_is_alerted(tmp_path):
    """`gate --live --rebuild-from` decided on the bags and sent nothing to the sinks."""
    metrics_bag(tmp_path / 'bag', [final_metrics_cdr(f'ep{i}', i + 1) for i in range(20)])
    (tmp_path / 'alerts.yaml').write_text(f'alerts:\n  jsonl: {tmp_path / "alerts.jsonl"}\n  min_interval_s: 0\n')
    proc = subprocess.run([*BIN, 'gate', '--live', '--max-rate', 'p=0.05', '--rebuild-from', str(tmp_path / 'bag'),
                           '--alerts', str(tmp_path / 'alerts.yaml')], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    alerts = [json.loads(line) for line in (tmp_path / 'alerts.jsonl').read_text().splitlines()]
    assert len(alerts) == 1 and alerts[0]['decision'] == PASS and alerts[0]['alpha'] == 0.05
    assert alerts[0]['summary'].startswith('PASS: p (fleet): 0 of 75 triggers violated in 15 rollouts; bound '), alerts[0]['summary']
    assert alerts[0]['time_utc'].endswith('Z') and alerts[0]['observations'] == 75 and alerts[0]['violations'] == 0


def final_metrics_cdr(rollout: str, stamp_s: int, triggers: int = 5, violations: int = 0) -> bytes:
    """A monitor's final MonitorMetrics of one rollout of property p (category c), as a recorder keeps it."""
    from safemanip_ros.bag import typestore
    ts = typestore()
    T, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    MM, PM = ts.types['safemanip_ros/msg/MonitorMetrics'], ts.types['safemanip_ros/msg/PropertyMetrics']
    msg = MM(header=Header(stamp=T(sec=stamp_s, nanosec=0), frame_id=''), episode_id=rollout, frames=100, final=True,
             properties=[PM(property='p', instance='p[x]', category='c', triggers=triggers, violations=violations,
                            unsafe_frames=0, frames=100, pending=0, unknown_frames=0)])
    return bytes(ts.serialize_cdr(msg, 'safemanip_ros/msg/MonitorMetrics'))


def metrics_bag(path, messages: list[bytes], topic: str = '/metrics') -> None:
    """A bag holding ``messages`` (serialized MonitorMetrics) on ``topic``, one a second from t = 1 s."""
    from safemanip_ros.bag import SplitBagWriter
    w = SplitBagWriter(path, 'mcap', split_s=100.0)
    w.add_topic(topic, 'safemanip_ros/msg/MonitorMetrics')
    for i, raw in enumerate(messages):
        w.write(topic, 10**9 * (i + 1), raw)
    w.close()
