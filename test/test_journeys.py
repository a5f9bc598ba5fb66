"""Users' journeys end to end through the real commands, with the numbers
checked by a judge of their own:

(a) an RL researcher wraps an environment of their own in a few lines, runs
    100 rollouts, and `safemanip specrl evaluate` scores the log: its rates
    equal those of a judge that reads the environment's own record (no LTLf);
(c) a release manager audits rollouts with a limit, looks at report.html in a
    browser, replays the gate (`gate --sequential`), then gates the same
    rollouts live (`gate --live`, alerts to a JSON-lines sink): one decision,
    one sentence, everywhere.

Journey (b), a ROS 2 engineer bringing a cell up from a recording (config
init, doctor, audit, a replay on /clock, ack and resume against the running
stack), is run by test_docs_run.py (docs/bringup.md, block by block) and
test_stack_integration.py (the operator's commands as processes).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from html import escape
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from conftest import REPO, run_cli

BIN = [sys.executable, '-m', 'safemanip_ros.cli.main']


class Corridor(gymnasium.Env):
    """A user's environment: a random walk on a corridor, lava at -3, the goal at +3, 30 steps at most.
    It says which of its propositions hold as {name: bool}, and keeps its own record of positions."""

    observation_space = gymnasium.spaces.Discrete(7)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self) -> None:
        self.record: list[list[int]] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = 0, 0
        self.record.append([])
        return self.x + 3, {}

    def step(self, action):
        self.x += 1 if action == 1 else -1
        self.t += 1
        self.record[-1].append(self.x)
        done = abs(self.x) >= 3
        return self.x + 3, 0.0, done, self.t >= 30 and not done, {'propositions': {'lava': self.x <= -3,
                                                                                   'goal': self.x >= 3}}


def test_a_researchers_own_environment_scored_as_an_independent_judge_scores_it(tmp_path):
    from safemanip_ros.gym import SpecMonitor
    env = Corridor()
    # The user's lines: wrap, then run their loop as always.
    wrapped = SpecMonitor(env, {'reach_avoid': '!lava U goal'}, log_path=tmp_path / 'rollouts.jsonl', seed=7)
    rng = np.random.default_rng(7)
    for _ in range(100):
        wrapped.reset()
        while not any(wrapped.step(int(rng.random() < 0.55))[2:4]):
            pass
    proc = run_cli('specrl', 'evaluate', str(tmp_path / 'rollouts.jsonl'), '--formula', '!lava U goal', '--json',
                   process=True)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    # The judge: the environment's own positions, read as the task means them.
    outcomes = ['success' if xs[-1] >= 3 else 'violation' if xs[-1] <= -3 else 'other' for xs in env.record]
    steps = [len(xs) for xs, o in zip(env.record, outcomes) if o == 'success']
    assert len(env.record) == 100 and 0 < outcomes.count('success') < 100 and outcomes.count('violation') > 0
    assert got['success_rate'] == pytest.approx(outcomes.count('success') / 100)
    assert got['violation_rate'] == pytest.approx(outcomes.count('violation') / 100)
    assert got['others_rate'] == pytest.approx(outcomes.count('other') / 100)
    assert got['mean_steps_to_success'] == pytest.approx(float(np.mean(steps)))


def _rollouts(path: Path, clean: int, violating: int) -> None:
    ok = '[["fixture_fully_open_microwave"], ["reach_in_microwave", "fixture_fully_open_microwave"], []]'
    bad = '[[], ["reach_in_microwave"], []]'
    path.write_text('\n'.join([ok] * clean + [bad] * violating) + '\n')


@pytest.mark.ros
def test_a_release_manager_audits_looks_replays_and_gates_live_with_one_sentence(tmp_path):
    scene = ['--scene', str(REPO / 'config' / 'scenes' / 'kitchen_demo.yaml')]
    _rollouts(tmp_path / 'canary.jsonl', 80, 0)
    out = tmp_path / 'audit'
    audit = run_cli('audit', str(tmp_path / 'canary.jsonl'), '--out', str(out), '--quiet', *scene,
                    '--max-rate', 'enclosure_access=0.05', '--unit', 'rollout', process=True)
    assert audit.returncode == 0, audit.stderr
    (row,) = json.loads((out / 'report.json').read_text())['sequential']['limits']
    sentence = row['summary']
    assert sentence.startswith('PASS: enclosure_access (fleet): 0 of 80 rollouts violated; bound ')
    # report.html in a browser: the sentence at its head, drawn.
    html = (out / 'report.html').read_text()
    assert html.index(f'<p class="decision">{escape(sentence)}</p>') < html.index('<h2>Properties</h2>')
    chromium = shutil.which('chromium') or shutil.which('chromium-browser')
    assert chromium, 'the test set-up installs Debian chromium (tools/setup_env.sh)'
    shot = tmp_path / 'report.png'
    subprocess.run([chromium, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                    '--disable-background-networking', '--disable-component-update', '--disable-sync',
                    f'--user-data-dir={tmp_path / "profile"}', '--window-size=1200,900', f'--screenshot={shot}',
                    (out / 'report.html').as_uri()], capture_output=True, text=True, timeout=120)
    import cv2
    img = cv2.imread(str(shot))
    assert img is not None and img.shape[1] == 1200 and (img[:300] < 100).any()    # text at the top
    # The gate replayed on the report says the same sentence.
    replayed = run_cli('gate', str(out / 'report.json'), '--sequential', '--unit', 'rollout',
                       '--max-rate', 'enclosure_access=0.05', process=True)
    assert replayed.returncode == 0 and sentence in replayed.stdout.splitlines(), replayed.stdout
    # Live: the same rollouts arrive as the monitor's final metrics; the decision goes to a JSON-lines sink.
    from test_gate_live import Fleet

    from safemanip_ros.msg import MonitorMetrics, PropertyMetrics
    (tmp_path / 'alerts.yaml').write_text(f'alerts:\n  jsonl: {tmp_path / "alerts.jsonl"}\n')
    fleet = Fleet()
    gate = subprocess.Popen([*BIN, 'gate', '--live', '--robot', 'r1', '--max-rate', 'enclosure_access=0.05',
                             '--unit', 'rollout', '--alerts', str(tmp_path / 'alerts.yaml'), '--state',
                             str(tmp_path / 'state.json')], stdout=open(tmp_path / 'gate.log', 'w'),
                            stderr=subprocess.STDOUT)
    try:
        assert fleet.spin_until(lambda: fleet.pubs['r1'].get_subscription_count() > 0)
        for i in range(80):
            if gate.poll() is not None:
                break
            fleet.pubs['r1'].publish(MonitorMetrics(episode_id=f'ep{i}', final=True, frames=3, properties=[
                PropertyMetrics(property='reach_in_fixture_only_when_fully_open', instance='x',
                                category='enclosure_access', triggers=1, violations=0)]))
            fleet.spin_until(lambda: ('', 'enclosure_access') in fleet.decisions and
                             fleet.decisions[('', 'enclosure_access')].rollouts > i, 10)
        assert gate.wait(timeout=60) == 0, (tmp_path / 'gate.log').read_text()
    finally:
        if gate.poll() is None:
            gate.kill()
        fleet.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (tmp_path / 'alerts.jsonl').exists():
        time.sleep(0.1)
    alerts = [json.loads(line) for line in (tmp_path / 'alerts.jsonl').read_text().splitlines()]
    live = [a for a in alerts if a['robot'] == 'fleet']
    assert len(live) == 1 and live[0]['decision'] == 'PASS' and live[0]['decided_after'] == row['after_observations']
    # The live sentence is the replay's, said at the decision (the replay's counts at the end are 80 rollouts).
    assert live[0]['summary'].startswith('PASS: enclosure_access (fleet): 0 of ') and \
        f'decided after {row["after_observations"]} rollouts' in live[0]['summary'] and \
        f'decided after {row["after_observations"]} rollouts' in sentence
